#ifndef SHARDWISE_WORKER_DAEMON_RESUME_CHECK_H_
#define SHARDWISE_WORKER_DAEMON_RESUME_CHECK_H_

// Before a rank of a later attempt joins, when an earlier attempt reported the job's
// checkpoint of a step complete in output.checkpoint_dir (Assignment.checkpoint_step):
// a host where that folder holds none of the job's checkpoints (its shared volume not
// mounted there: the folder missing, or an empty mount point) lacks one of the job's
// inputs (IsMissingInput), so that the coordinator blames the host where another rank
// found the folder (server/missing_inputs.h), the job's restarts untouched. UNAVAILABLE,
// not permanent as a path the spec names that no host has: where no rank finds them (a
// volume missing across the cluster, or the checkpoints removed) the attempt fails,
// re-queued under the restart policy.
// What else this host finds there (a damaged step, one it cannot read now) is left to
// the trainer's choice of the checkpoint to resume from.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "contracts/job_identity.h"

namespace shardwise {

absl::Status CheckTheJobsCheckpointsAreHere(const std::string& dir, const JobIdentity& job,
                                            int64_t reported_step);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_RESUME_CHECK_H_
