#ifndef SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_
#define SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_

// A rank's shards of its units' flat parameters, assembled from the model's parameters
// given one at a time, each only what of it lies in this rank's shard (initial weights
// read or generated a tensor at a time: worker/data/weights.h), so that a rank's host holds
// its shards and part of one parameter, never the whole model. Each unit's flat buffer is
// its parameters in registration order, zero-padded to a multiple of the shard group, cut
// into equal shards (docs/semantics.md: "Units and flat parameters").
//
// Thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "contracts/safetensors.h"
#include "contracts/weights_file.h"

namespace shardwise::fsdp {

class ShardAssembler : public ParameterReceiver {
 public:
  // `layout` must outlive the assembler.
  ShardAssembler(const FlatLayout& layout, const ShardingPlan& plan);

  // What of parameter `name` lies in this rank's shard of its unit (empty for a name the
  // model does not have, or a count not its own: Take refuses that).
  ElementRange Wanted(const std::string& name, int64_t numel) const override;
  // Keeps the piece, what Wanted said of parameter `name`; a name the model does not have
  // is passed over (a tied head, another tensor of the file). INVALID_ARGUMENT for a piece
  // without the parameter's element count; INTERNAL for other elements than Wanted's (a
  // reader's bug).
  absl::Status Take(const std::string& name, const ParameterPiece& piece) override;
  // The same for a whole tensor, which must be F32.
  absl::Status Take(const std::string& name, const HostTensor& tensor);

  // Per unit, this rank's shard (shard_numel elements, zeros in the padding);
  // INVALID_ARGUMENT naming the first parameter never taken.
  absl::StatusOr<std::vector<std::vector<float>>> Finish() &&;

 private:
  absl::Status Lacks(int param) const;
  // Where this rank's shard of parameter `p`'s unit lies in the unit's flat buffer.
  ElementRange Mine(int p) const;

  const FlatLayout& layout_;
  const int shard_rank_;
  absl::flat_hash_map<std::string, int> param_of_name_;
  std::vector<bool> taken_;                 // per parameter
  std::vector<std::vector<float>> shards_;  // per unit
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_SHARD_ASSEMBLER_H_
