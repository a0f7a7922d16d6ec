#ifndef SHARDWISE_COMMON_STATUS_MACROS_H_
#define SHARDWISE_COMMON_STATUS_MACROS_H_

// The Abseil shipped with Debian 12 (20220623) has no status macros; these are the two
// that Shardwise uses.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SHARDWISE_CONCAT_INNER_(a, b) a##b
#define SHARDWISE_CONCAT_(a, b) SHARDWISE_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    ::absl::Status shardwise_status_ = (expr);             \
    if (!shardwise_status_.ok()) return shardwise_status_; \
  } while (0)

// `lhs = value of expr` (an absl::StatusOr<T>), or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(SHARDWISE_CONCAT_(shardwise_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // SHARDWISE_COMMON_STATUS_MACROS_H_
