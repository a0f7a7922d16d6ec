#ifndef SHARDWISE_WORKER_FSDP_OPTIMIZER_RANGES_H_
#define SHARDWISE_WORKER_FSDP_OPTIMIZER_RANGES_H_

// How the optimizer steps a rank's flat shards: each unit's shard cut into ranges at the
// parameter boundaries where weight decay (optimizer.weight_decay_params) or the time of
// the step (optimizer.overlap: in backward, right after the unit's reduction, or after
// backward) changes; adjacent ranges alike are merged. Padding steps with its neighbours
// (it stays zero under every rule). Pure.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

struct ShardRange {
  int64_t begin = 0, end = 0;  // in the unit's shard
  bool decay = true;
  bool in_backward = false;
  bool operator==(const ShardRange& o) const {
    return begin == o.begin && end == o.end && decay == o.decay && in_backward == o.in_backward;
  }
};

// Per unit, the ranges of this rank's shard ([shard_rank * shard_numel, + shard_numel) of
// the padded flat buffer). INVALID_ARGUMENT if optimizer.overlap.params names a
// parameter the model lacks.
absl::StatusOr<std::vector<std::vector<ShardRange>>> PlanOptimizerRanges(
    const FlatLayout& layout, const ShardingPlan& plan, const v1::OptimizerSpec& optimizer);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_OPTIMIZER_RANGES_H_
