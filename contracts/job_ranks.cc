#include "contracts/job_ranks.h"

#include <algorithm>

namespace shardwise {

int32_t ReplicaGroupSize(const v1::JobSpec& spec) {
  switch (spec.fsdp().sharding_strategy()) {
    case v1::ShardingStrategy::HYBRID_SHARD:
    case v1::ShardingStrategy::HYBRID_SHARD_ZERO2:
      return std::max(1, spec.fsdp().shard_group_size());
    case v1::ShardingStrategy::NO_SHARD:
      return 1;
    default:
      return std::max(1, spec.world_size());
  }
}

int32_t InitialReplicas(const v1::JobSpec& spec) {
  return std::max(1, spec.world_size() / ReplicaGroupSize(spec));
}

int32_t MaxReplicas(const v1::JobSpec& spec) {
  const int32_t most = spec.has_fault_tolerance() ? spec.fault_tolerance().max_replicas() : 0;
  return most > 0 ? most : InitialReplicas(spec);
}

int32_t JobRanks(const v1::JobSpec& spec) {
  if (MaxReplicas(spec) == InitialReplicas(spec)) return std::max(1, spec.world_size());
  return MaxReplicas(spec) * ReplicaGroupSize(spec);
}

}  // namespace shardwise
