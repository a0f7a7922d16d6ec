#ifndef SHARDWISE_COMMON_GRPC_STATUS_H_
#define SHARDWISE_COMMON_GRPC_STATUS_H_

// Conversions between absl::Status (used everywhere inside Shardwise) and grpc::Status
// (what crosses the wire). The numeric codes of the two are the same by design.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace shardwise {

// The most of a status's message that crosses the wire. gRPC refuses metadata over 8 KiB,
// and a message echoing a value someone gave (a path, a name, a key of a file) could be
// longer: the call would then fail as RESOURCE_EXHAUSTED, which clients retry, instead of
// reporting what was wrong. Messages are cut here as a last line; those that echo values
// cut them first (common/printable_text.h, ShownValue).
inline constexpr size_t kMaxStatusMessageBytes = 4096;

// `message` cut to at most `max_bytes`, at a UTF-8 character boundary, saying so.
inline std::string CutStatusMessage(absl::string_view message,
                                    size_t max_bytes = kMaxStatusMessageBytes) {
  if (message.size() <= max_bytes) return std::string(message);
  constexpr absl::string_view kCut = " ... (message cut)";
  size_t keep = max_bytes - kCut.size();
  while (keep > 0 && (static_cast<unsigned char>(message[keep]) & 0xc0) == 0x80) --keep;
  return absl::StrCat(message.substr(0, keep), kCut);
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      CutStatusMessage(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_GRPC_STATUS_H_
