#include "client/exit_code.h"

#include "absl/strings/str_cat.h"

namespace shardwise {

bool IsRefusal(const absl::Status& failure) {
  switch (failure.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    // Also this client's own setup: a token it will not send in plaintext, a TLS file it
    // cannot read, an output file it cannot write.
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    // The coordinator's release lacks the call: asking again changes nothing.
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      // UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED, CANCELLED: not
      // reached, busy or late; INTERNAL, UNKNOWN, DATA_LOSS: the coordinator's own failure,
      // after which a call that changes state may or may not have taken effect.
      return false;
  }
}

ExitCode ExitCodeOf(const absl::Status& failure) {
  return IsRefusal(failure) ? kExitRefused : kExitUnknown;
}

std::string FailureLine(const absl::Status& failure) {
  return absl::StrCat("shardwise: ", absl::StatusCodeToString(failure.code()), ": ",
                      failure.message(), "\n");
}

}  // namespace shardwise
