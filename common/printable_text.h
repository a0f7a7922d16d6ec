#ifndef SHARDWISE_COMMON_PRINTABLE_TEXT_H_
#define SHARDWISE_COMMON_PRINTABLE_TEXT_H_

// Text that users name things with (job names) and that Shardwise prints to terminals and
// tables: valid UTF-8 without control characters (C0, DEL, C1), line or paragraph
// separators, or bidirectional overrides, any of which could move a terminal's cursor,
// break a table or disguise what is shown.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace shardwise {

// The number of characters (code points) of `text`; INVALID_ARGUMENT saying what is wrong
// and at which character when it is not printable text as above.
absl::StatusOr<int64_t> CountPrintableCharacters(const std::string& text);

// OK when `text` is printable text of at most `max_characters` characters; otherwise
// INVALID_ARGUMENT "FIELD: what is wrong".
absl::Status CheckPrintableField(const std::string& field, const std::string& text,
                                 int64_t max_characters);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_PRINTABLE_TEXT_H_
