#ifndef SHARDWISE_CONTRACTS_PERMANENT_FAILURE_H_
#define SHARDWISE_CONTRACTS_PERMANENT_FAILURE_H_

// A failure that any attempt of the job would repeat: it comes from the job itself (its
// data, its numbers), not from the cluster (a lost worker, a network error). The restart
// policy does not re-queue such a failure. Marked with a payload on the status, so it
// survives being passed up through layers that only propagate statuses.

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "common/field_failure.h"

namespace shardwise {

inline constexpr char kPermanentFailureUrl[] = "type.shardwise.dev/permanent-failure";

inline absl::Status MarkPermanent(absl::Status status) {
  if (!status.ok()) status.SetPayload(kPermanentFailureUrl, absl::Cord("1"));
  return status;
}

// MarkPermanent, except for UNAVAILABLE: what a host could not tell now (its storage's
// I/O error, no file descriptor left) is not the job's to repeat.
inline absl::Status PermanentUnlessTransient(absl::Status status) {
  return absl::IsUnavailable(status) ? status : MarkPermanent(std::move(status));
}

// `status` (not OK) as a failure of the job's field `field` (its message prefixed with
// the field): INVALID_ARGUMENT and permanent, except UNAVAILABLE, kept as the attempt's.
inline absl::Status JobFieldFailure(absl::string_view field, const absl::Status& status) {
  return PermanentUnlessTransient(FieldFailure(field, status));
}

inline bool IsPermanent(const absl::Status& status) {
  return status.GetPayload(kPermanentFailureUrl).has_value();
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_PERMANENT_FAILURE_H_
