#ifndef SHARDWISE_COMMON_FIELD_FAILURE_H_
#define SHARDWISE_COMMON_FIELD_FAILURE_H_

// An error met while reading what an input field names (a file, a folder) as that field's
// failure. One rule for every reader of job inputs: what the host could not do now keeps
// its code (the caller retries, another attempt elsewhere may succeed); what the input
// holds is the caller's bad input, INVALID_ARGUMENT.

#include <algorithm>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// `cause` (not OK) with its message prefixed by `subject` (the field, and the path where
// it helps): its code if among `kept`, INVALID_ARGUMENT otherwise. UNAVAILABLE (an I/O
// error, no descriptor left) is kept unless a caller says otherwise.
inline absl::Status FieldFailure(absl::string_view subject, const absl::Status& cause,
                                 std::initializer_list<absl::StatusCode> kept = {
                                     absl::StatusCode::kUnavailable}) {
  const bool keep = std::find(kept.begin(), kept.end(), cause.code()) != kept.end();
  return absl::Status(keep ? cause.code() : absl::StatusCode::kInvalidArgument,
                      absl::StrCat(subject, ": ", cause.message()));
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_FIELD_FAILURE_H_
