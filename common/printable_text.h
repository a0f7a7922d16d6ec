#ifndef SHARDWISE_COMMON_PRINTABLE_TEXT_H_
#define SHARDWISE_COMMON_PRINTABLE_TEXT_H_

// Text that users name things with (job names) and that Shardwise prints to terminals and
// tables: valid UTF-8 without control characters (C0, DEL, C1), line or paragraph
// separators, or bidirectional overrides, any of which could move a terminal's cursor,
// break a table or disguise what is shown.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// The number of characters (code points) of `text`; INVALID_ARGUMENT saying what is wrong
// and at which character when it is not printable text as above.
absl::StatusOr<int64_t> CountPrintableCharacters(const std::string& text);

// OK when `text` is printable text of at most `max_characters` characters; otherwise
// INVALID_ARGUMENT "FIELD: what is wrong".
absl::Status CheckPrintableField(const std::string& field, const std::string& text,
                                 int64_t max_characters);

// A value someone gave (a path, a name, a key of a file), as a message may echo it: its
// unprintable characters (as above) and any byte that is not UTF-8 escaped as \xHH or
// \u{HHHH}, and cut after `max_bytes` bytes of the original with "... (N bytes)" after
// it. An error message echoes its values this way: a whole megabyte of a value would
// exceed gRPC's 8 KiB limit on a status's message (the call would fail as
// RESOURCE_EXHAUSTED and be retried), and control characters could forge lines on the
// terminal or in the logs that show it.
inline constexpr size_t kShownValueBytes = 200;
std::string ShownValue(absl::string_view value, size_t max_bytes = kShownValueBytes);

// A number someone gave, as a message echoes it: %g with six significant digits, or as
// many more as it takes to read back as the same double ("0.1", "500000",
// "1.1754943508222875e-38", "inf", "nan"). StrCat's six digits alone could show a
// refused value as the very bound it breaks, or two values that differ as one.
std::string ShownNumber(double value);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_PRINTABLE_TEXT_H_
