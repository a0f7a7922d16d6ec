#ifndef SHARDWISE_COMMON_GRPC_STATUS_H_
#define SHARDWISE_COMMON_GRPC_STATUS_H_

// Conversions between absl::Status (used everywhere inside Shardwise) and grpc::Status
// (what crosses the wire). The numeric codes of the two are the same by design.

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace shardwise {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_GRPC_STATUS_H_
