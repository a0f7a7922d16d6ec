#include "contracts/fsdp_layout.h"

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {

absl::StatusOr<FlatLayout> BuildFlatLayout(const v1::ModelSpec& model, const v1::WrapPolicy& wrap) {
  FlatLayout layout;
  auto description = DescribeModel(model);
  if (!description.ok()) return description.status();
  layout.model = std::move(*description);
  auto assignment = AssignUnits(layout.model, wrap);
  if (!assignment.ok()) return assignment.status();
  layout.assignment = std::move(*assignment);
  layout.units.resize(layout.assignment.num_units);
  layout.units.back().is_root = true;
  for (int p = 0; p < static_cast<int>(layout.model.params.size()); ++p) {
    const int u = layout.assignment.unit_of_param[p];
    UnitLayout& unit = layout.units[u];
    layout.slots.push_back({u, unit.numel});
    unit.params.push_back(p);
    unit.numel += layout.model.params[p].numel();
  }
  for (int s = 0; s < static_cast<int>(layout.model.stages.size()); ++s) {
    UnitLayout& unit = layout.units[layout.assignment.unit_of_stage[s]];
    if (unit.first_stage < 0) unit.first_stage = s;
    unit.last_stage = s;
  }
  return layout;
}

void AddUnitTensors(const FlatLayout& layout, int unit, const float* flat, TensorMap* tensors) {
  for (int p : layout.units[unit].params) {
    const ParameterDesc& param = layout.model.params[p];
    (*tensors)[param.name] = F32Tensor(param.shape, flat + layout.slots[p].offset);
  }
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

ElementRange ShardElements(int shard, int64_t shard_numel) {
  return {shard * shard_numel, (shard + 1) * shard_numel};
}

std::vector<int> ShardingPlan::ShardGroupRanks() const {
  std::vector<int> ranks;
  ranks.reserve(shard_size);
  for (int i = 0; i < shard_size; ++i) ranks.push_back(replicate_rank * shard_size + i);
  return ranks;
}

std::vector<int> ShardingPlan::ReplicateGroupRanks() const {
  std::vector<int> ranks;
  ranks.reserve(replicate_size);
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
        return absl::InvalidArgumentError(absl::StrCat("fsdp.shard_group_size ",
                                                       fsdp.shard_group_size(),
                                                       " does not divide world_size ", world_size));
      }
      plan.shard_size = fsdp.shard_group_size();
      plan.reshard_after_forward = fsdp.sharding_strategy() == v1::ShardingStrategy::HYBRID_SHARD;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("fsdp.sharding_strategy: unknown value ", fsdp.sharding_strategy()));
  }
  plan.replicate_size = world_size / plan.shard_size;
  plan.shard_rank = rank % plan.shard_size;
  plan.replicate_rank = rank / plan.shard_size;
  if (!plan.sharded()) plan.reshard_after_forward = false;
  DivideFactors(world_size, &plan.predivide, &plan.postdivide);
  return plan;
}

}  // namespace shardwise::fsdp
