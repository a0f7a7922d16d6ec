#ifndef SHARDWISE_CONTRACTS_FSDP_LAYOUT_H_
#define SHARDWISE_CONTRACTS_FSDP_LAYOUT_H_

// Pure descriptions of how a job's model is split into FSDP units and sharded: which
// parameters each unit holds, where each sits in the unit's flat buffer, and each rank's
// groups and divide factors (docs/semantics.md: "Units and flat parameters",
// "Gradient reduction").

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/element_range.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

// Where a parameter lives: its unit, and its offset in that unit's flat buffer.
struct ParameterSlot {
  int unit = 0;
  int64_t offset = 0;
};

struct UnitLayout {
  std::vector<int> params;  // the parameters it holds, in registration order
  int64_t numel = 0;        // before padding
  bool is_root = false;
  // The first and last stage it runs (the root's may be far apart: a GPT's root runs the
  // embeddings first and the head last); -1 when it runs none.
  int first_stage = -1;
  int last_stage = -1;
  bool has_stages() const { return first_stage >= 0; }
};

// A job's model cut into FSDP units by its wrap policy, with each unit's parameters
// flattened in registration order (docs/semantics.md: "Units and flat parameters").
// `units` lists the children in the order they first run, then the root.
struct FlatLayout {
  ModelDescription model;
  UnitAssignment assignment;
  std::vector<UnitLayout> units;
  std::vector<ParameterSlot> slots;  // per parameter
  int root_unit() const { return static_cast<int>(units.size()) - 1; }
};

// INVALID_ARGUMENT for a model that cannot be described or a wrap policy that does not
// fit it (contracts/model_description.h).
absl::StatusOr<FlatLayout> BuildFlatLayout(const v1::ModelSpec& model, const v1::WrapPolicy& wrap);

// Adds the parameters of unit `unit`, read from its flat buffer `flat`, to `tensors`
// under their state-dict names.
void AddUnitTensors(const FlatLayout& layout, int unit, const float* flat, TensorMap* tensors);

// Every strategy is a shard group (ranks that split the parameters) times a replicate
// group (ranks that hold the same shard), plus whether units reshard after forward:
// FULL_SHARD = (W, 1, yes); SHARD_GRAD_OP = (W, 1, no); NO_SHARD = (1, W): parameters
// whole, gradients all-reduced; HYBRID_SHARD = (S, W/S, yes); HYBRID_SHARD_ZERO2 =
// (S, W/S, no). A world of one is (1, 1), which behaves as NO_SHARD.
struct ShardingPlan {
  int world_size = 1;
  int rank = 0;
  int shard_size = 1;      // ranks per shard group
  int replicate_size = 1;  // shard groups
  int shard_rank = 0;      // rank within the shard group
  int replicate_rank = 0;  // which shard group
  bool reshard_after_forward = false;
  double predivide = 1;  // gradients are divided by these before / after reduction
  double postdivide = 1;

  bool sharded() const { return shard_size > 1; }
  // Global ranks of this rank's shard group and replicate group, in group order.
  std::vector<int> ShardGroupRanks() const;
  std::vector<int> ReplicateGroupRanks() const;
};

absl::StatusOr<ShardingPlan> PlanSharding(const v1::FsdpConfig& fsdp, int world_size, int rank);

// FSDP's gradient divide factors for N ranks, as PyTorch's _get_gradient_predivide_factor
// computes them: f doubles from 1 while N % f == 0 and N / f > f (so f need not divide N:
// 6 gives 4); predivide f, postdivide N / f (docs/semantics.md, "Gradient reduction").
void DivideFactors(int n, double* predivide, double* postdivide);

// W * ceil(numel / W).
int64_t PaddedNumel(int64_t numel, int shard_size);

// Where shard `shard` of a flat buffer cut into shards of `shard_numel` elements lies.
ElementRange ShardElements(int shard, int64_t shard_numel);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_CONTRACTS_FSDP_LAYOUT_H_
