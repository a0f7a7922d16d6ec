#ifndef SHARDWISE_WORKER_FSDP_LAYOUT_H_
#define SHARDWISE_WORKER_FSDP_LAYOUT_H_

// Pure descriptions of how a job's model is split into FSDP units and sharded: which
// layers each unit owns, where each parameter sits in the unit's flat buffer, and each
// rank's groups and divide factors (SEMANTICS.md: "Flat parameters and sharding",
// "Gradient reduction").

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

struct LayerLayout {
  int64_t in = 0, out = 0;
  bool bias = true;
  int unit = 0;                // the unit that owns this layer's parameters
  int64_t weight_offset = 0;   // in the unit's flat buffer
  int64_t bias_offset = -1;    // -1 without bias
  std::string weight_name;     // nn.Sequential state-dict names: "0.weight", "0.bias", ...
  std::string bias_name;
};

struct UnitLayout {
  std::vector<int> layers;  // in forward order
  bool is_root = false;
  int64_t numel = 0;         // parameters, before padding
};

// Child units wrap `layers_per_unit` consecutive Linear layers each; layers left over at
// the end belong to the root unit, which wraps the whole model (as FSDP's auto-wrap leaves
// unwrapped modules to the root). `units` lists the children in forward order, then the
// root (whose `layers` may be empty).
struct ModelLayout {
  std::vector<LayerLayout> layers;
  std::vector<UnitLayout> units;
  int root_unit() const { return static_cast<int>(units.size()) - 1; }
};

ModelLayout BuildModelLayout(const v1::ModelSpec& model, const v1::WrapPolicy& wrap);

// Every strategy is a shard group (ranks that split the parameters) times a replicate
// group (ranks that hold the same shard), plus whether units reshard after forward:
// FULL_SHARD = (W, 1, yes); SHARD_GRAD_OP = (W, 1, no); NO_SHARD = (1, W): parameters
// whole, gradients all-reduced; HYBRID_SHARD = (S, W/S, yes); HYBRID_SHARD_ZERO2 =
// (S, W/S, no). A world of one is (1, 1), which behaves as NO_SHARD.
struct ShardingPlan {
  int world_size = 1;
  int rank = 0;
  int shard_size = 1;       // ranks per shard group
  int replicate_size = 1;   // shard groups
  int shard_rank = 0;       // rank within the shard group
  int replicate_rank = 0;   // which shard group
  bool reshard_after_forward = false;
  double predivide = 1;     // gradients are divided by these before / after reduction
  double postdivide = 1;

  bool sharded() const { return shard_size > 1; }
  // Global ranks of this rank's shard group and replicate group, in group order.
  std::vector<int> ShardGroupRanks() const;
  std::vector<int> ReplicateGroupRanks() const;
};

absl::StatusOr<ShardingPlan> PlanSharding(const v1::FsdpConfig& fsdp, int world_size, int rank);

// FSDP's gradient divide factors for N ranks: the largest power of two f with N % f == 0
// and N / f > f... built up by doubling; predivide f, postdivide N / f.
void DivideFactors(int n, double* predivide, double* postdivide);

// W * ceil(numel / W).
int64_t PaddedNumel(int64_t numel, int shard_size);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_LAYOUT_H_
