#include "worker/fsdp/layout.h"

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {

ModelLayout BuildModelLayout(const v1::ModelSpec& model, const v1::WrapPolicy& wrap) {
  ModelLayout layout;
  const int num_layers = model.layer_widths_size() - 1;
  const int per_unit = std::max(1, wrap.layers_per_unit());
  const int children = num_layers / per_unit;
  layout.units.resize(children + 1);
  layout.units.back().is_root = true;
  for (int l = 0; l < num_layers; ++l) {
    LayerLayout layer;
    layer.in = model.layer_widths(l);
    layer.out = model.layer_widths(l + 1);
    layer.bias = !model.has_bias() || model.bias();
    layer.unit = l / per_unit < children ? l / per_unit : children;
    // Linear k is module 2k of the nn.Sequential (activations sit between them).
    layer.weight_name = absl::StrCat(2 * l, ".weight");
    layer.bias_name = absl::StrCat(2 * l, ".bias");
    UnitLayout& unit = layout.units[layer.unit];
    // Flattened in registration order: weight, then bias.
    layer.weight_offset = unit.numel;
    unit.numel += layer.in * layer.out;
    if (layer.bias) {
      layer.bias_offset = unit.numel;
      unit.numel += layer.out;
    }
    unit.layers.push_back(l);
    layout.layers.push_back(layer);
  }
  return layout;
}

void DivideFactors(int n, double* predivide, double* postdivide) {
  int f = 1;
  while (n % f == 0 && n / f > f) f *= 2;
  *predivide = f;
  *postdivide = static_cast<double>(n) / f;
}

int64_t PaddedNumel(int64_t numel, int shard_size) {
  return (numel + shard_size - 1) / shard_size * shard_size;
}

std::vector<int> ShardingPlan::ShardGroupRanks() const {
  std::vector<int> ranks;
  for (int i = 0; i < shard_size; ++i) ranks.push_back(replicate_rank * shard_size + i);
  return ranks;
}

std::vector<int> ShardingPlan::ReplicateGroupRanks() const {
  std::vector<int> ranks;
  for (int g = 0; g < replicate_size; ++g) ranks.push_back(g * shard_size + shard_rank);
  return ranks;
}

absl::StatusOr<ShardingPlan> PlanSharding(const v1::FsdpConfig& fsdp, int world_size, int rank) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in a world of ", world_size));
  }
  ShardingPlan plan;
  plan.world_size = world_size;
  plan.rank = rank;
  switch (fsdp.sharding_strategy()) {
    case v1::ShardingStrategy::SHARDING_STRATEGY_UNSPECIFIED:
    case v1::ShardingStrategy::FULL_SHARD:
      plan.shard_size = world_size;
      plan.reshard_after_forward = true;
      break;
    case v1::ShardingStrategy::SHARD_GRAD_OP:
      plan.shard_size = world_size;
      break;
    case v1::ShardingStrategy::NO_SHARD:
      plan.shard_size = 1;
      break;
    case v1::ShardingStrategy::HYBRID_SHARD:
    case v1::ShardingStrategy::HYBRID_SHARD_ZERO2:
      if (fsdp.shard_group_size() <= 0 || world_size % fsdp.shard_group_size() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fsdp.shard_group_size ", fsdp.shard_group_size(),
                         " does not divide world_size ", world_size));
      }
      plan.shard_size = fsdp.shard_group_size();
      plan.reshard_after_forward =
          fsdp.sharding_strategy() == v1::ShardingStrategy::HYBRID_SHARD;
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("fsdp.sharding_strategy: unknown value ",
                                                     fsdp.sharding_strategy()));
  }
  plan.replicate_size = world_size / plan.shard_size;
  plan.shard_rank = rank % plan.shard_size;
  plan.replicate_rank = rank / plan.shard_size;
  if (!plan.sharded()) plan.reshard_after_forward = false;
  DivideFactors(world_size, &plan.predivide, &plan.postdivide);
  return plan;
}

}  // namespace shardwise::fsdp
