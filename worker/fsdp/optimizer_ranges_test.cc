#include "worker/fsdp/optimizer_ranges.h"

#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

FlatLayout Mlp() {
  v1::ModelSpec model;
  for (int w : {2, 3}) model.add_layer_widths(w);  // 0.weight [3, 2] then 0.bias [3]
  return *BuildFlatLayout(model, v1::WrapPolicy());
}

ShardingPlan Plan(int shard_size, int shard_rank) {
  ShardingPlan plan;
  plan.shard_size = shard_size;
  plan.shard_rank = shard_rank;
  return plan;
}

TEST(PlanOptimizerRanges, WholeShardWhenEverythingStepsAlike) {
  v1::OptimizerSpec optimizer;
  auto ranges = PlanOptimizerRanges(Mlp(), Plan(2, 1), optimizer);
  ASSERT_TRUE(ranges.ok());
  // 9 parameters padded to 10; rank 1 holds 5.
  EXPECT_EQ((*ranges)[0], (std::vector<ShardRange>{{0, 5, true, false}}));
}

TEST(PlanOptimizerRanges, MatricesOnlyLeavesBiasesUndecayed) {
  v1::OptimizerSpec optimizer;
  optimizer.set_weight_decay_params(v1::WeightDecayParams::MATRICES);
  auto ranges = PlanOptimizerRanges(Mlp(), Plan(2, 1), optimizer);
  ASSERT_TRUE(ranges.ok());
  // Shard [5, 10): weight elements 5 and the bias 6..8, then padding 9 (like the bias).
  EXPECT_EQ((*ranges)[0], (std::vector<ShardRange>{{0, 1, true, false}, {1, 5, false, false}}));
}

TEST(PlanOptimizerRanges, ChosenParametersStepInBackward) {
  v1::OptimizerSpec optimizer;
  optimizer.mutable_overlap()->set_mode(v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER);
  optimizer.mutable_overlap()->add_params("0.bias");
  auto ranges = PlanOptimizerRanges(Mlp(), Plan(1, 0), optimizer);
  ASSERT_TRUE(ranges.ok());
  EXPECT_EQ((*ranges)[0], (std::vector<ShardRange>{{0, 6, true, false}, {6, 9, true, true}}));
  optimizer.mutable_overlap()->add_params("7.weight");
  EXPECT_EQ(PlanOptimizerRanges(Mlp(), Plan(1, 0), optimizer).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardwise::fsdp
