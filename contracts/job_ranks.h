#ifndef SHARDWISE_CONTRACTS_JOB_RANKS_H_
#define SHARDWISE_CONTRACTS_JOB_RANKS_H_

// How many ranks a job has, for the coordinator, the workers and the client alike. A job
// starts with world_size ranks; a fault-tolerant one may grow to
// fault_tolerance.max_replicas replica groups (`shardwise scale`). Its rank ids and its
// rows are laid out over all the ranks it may have (docs/semantics.md, "Batches"), so
// that a rank's rows depend on its id alone, whatever the membership.

#include <cstdint>

#include "proto/job_spec.pb.h"

namespace shardwise {

// Ranks per replica group: the shard group's size under the HYBRID strategies, 1 under
// NO_SHARD, the whole world otherwise (no rank holds a replica of its own).
int32_t ReplicaGroupSize(const v1::JobSpec& spec);

// The replica groups of world_size: the job's size at the start of each attempt.
int32_t InitialReplicas(const v1::JobSpec& spec);

// fault_tolerance.max_replicas, or InitialReplicas when unset (0) or without fault
// tolerance.
int32_t MaxReplicas(const v1::JobSpec& spec);

// The ranks the job's ids and rows are laid out over: MaxReplicas groups of
// ReplicaGroupSize; world_size unless the job may grow.
int32_t JobRanks(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_RANKS_H_
