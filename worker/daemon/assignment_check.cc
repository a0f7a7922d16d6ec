#include "worker/daemon/assignment_check.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "contracts/timeouts.h"

namespace shardwise {

absl::Status CheckAssignment(const v1::Assignment& assignment) {
  const int64_t rank = assignment.rank(), world_size = assignment.world_size();
  // A fault-tolerant job numbers its ranks across its membership: a replica group added
  // by scaling up takes ranks past the spec's world_size.
  const bool numbered_past_world = assignment.spec().has_fault_tolerance();
  if (world_size < 1 || rank < 0 || (rank >= world_size && !numbered_past_world)) {
    return absl::InternalError(
        absl::StrCat("the coordinator assigned rank ", rank, " of world_size ", world_size,
                     " (a rank is in [0, world_size), or at least 0 in a fault-tolerant job): an "
                     "assignment this worker cannot run (a coordinator "
                     "of another release?)"));
  }
  if (assignment.has_join() && !assignment.spec().has_fault_tolerance()) {
    return absl::InternalError(absl::StrCat(
        "the coordinator assigned a join (membership epoch ", assignment.join().epoch(),
        ") for a job without fault_tolerance: an assignment this worker cannot run (a "
        "coordinator of another release?)"));
  }
  for (const auto& [field, value] :
       {std::make_pair("collective_timeout_ms", assignment.collective_timeout_ms()),
        std::make_pair("join_wait_ms", assignment.join_wait_ms())}) {
    if (value < 0 || value > kMaxTimeoutMilliseconds) {
      return absl::InternalError(absl::StrCat(
          "the coordinator assigned ", field, " ", value, " (0 to ", kMaxTimeoutMilliseconds,
          "): an assignment this worker cannot run (a coordinator of another release?)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardwise
