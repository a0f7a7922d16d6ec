#ifndef SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_
#define SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_

// A rank's shards of its units' flat parameters, assembled from the model's parameters
// given one at a time (initial weights read or generated a tensor at a time:
// worker/data/weights.h), so that a rank's host holds its shards and one parameter, never
// the whole model. Each unit's flat buffer is its parameters in registration order,
// zero-padded to a multiple of the shard group, cut into equal shards (docs/semantics.md:
// "Flat parameters and sharding"); only what falls into this rank's shard is kept.
//
// Thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "contracts/safetensors.h"

namespace shardwise::fsdp {

class ShardAssembler {
 public:
  // `layout` must outlive the assembler.
  ShardAssembler(const FlatLayout& layout, const ShardingPlan& plan);

  // Keeps what of parameter `name` lies in this rank's shard of its unit; a name the model
  // does not have is passed over (a tied head, another tensor of the file).
  // INVALID_ARGUMENT for a tensor that is not F32 with the parameter's element count.
  absl::Status Take(const std::string& name, const HostTensor& tensor);

  // Per unit, this rank's shard (shard_numel elements, zeros in the padding);
  // INVALID_ARGUMENT naming the first parameter never taken.
  absl::StatusOr<std::vector<std::vector<float>>> Finish() &&;

 private:
  absl::Status Lacks(int param) const;

  const FlatLayout& layout_;
  const int shard_rank_;
  absl::flat_hash_map<std::string, int> param_of_name_;
  std::vector<bool> taken_;                 // per parameter
  std::vector<std::vector<float>> shards_;  // per unit
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_
