#include "worker/fsdp/layout.h"

#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

v1::ModelSpec Model(std::vector<int> widths, bool bias = true) {
  v1::ModelSpec model;
  for (int w : widths) model.add_layer_widths(w);
  model.set_bias(bias);
  return model;
}

TEST(DivideFactors, MatchSemantics) {
  // SEMANTICS.md: N=2 -> (2, 1); 3 -> (2, 1.5); 4 -> (2, 2); 6 -> (4, 1.5); 8 -> (4, 2);
  // 16 -> (4, 4).
  const std::vector<std::tuple<int, double, double>> expected = {
      {1, 1, 1}, {2, 2, 1}, {3, 2, 1.5}, {4, 2, 2}, {6, 4, 1.5}, {8, 4, 2}, {16, 4, 4}};
  for (const auto& [n, pre, post] : expected) {
    double predivide, postdivide;
    DivideFactors(n, &predivide, &postdivide);
    EXPECT_EQ(predivide, pre) << n;
    EXPECT_EQ(postdivide, post) << n;
  }
}

TEST(BuildModelLayout, EachLinearItsOwnUnitByDefault) {
  v1::WrapPolicy wrap;
  ModelLayout layout = BuildModelLayout(Model({4, 8, 3}), wrap);
  ASSERT_EQ(layout.units.size(), 3u);  // two children and an empty root
  EXPECT_EQ(layout.units[0].numel, 4 * 8 + 8);
  EXPECT_EQ(layout.units[1].numel, 8 * 3 + 3);
  EXPECT_TRUE(layout.units[2].is_root);
  EXPECT_TRUE(layout.units[2].layers.empty());
  EXPECT_EQ(layout.layers[1].weight_name, "2.weight");
  EXPECT_EQ(layout.layers[1].bias_name, "2.bias");
  EXPECT_EQ(layout.layers[1].weight_offset, 0);
  EXPECT_EQ(layout.layers[1].bias_offset, 24);
}

TEST(BuildModelLayout, LeftoverLayersBelongToTheRoot) {
  v1::WrapPolicy wrap;
  wrap.set_layers_per_unit(2);
  ModelLayout layout = BuildModelLayout(Model({2, 3, 4, 5}, /*bias=*/false), wrap);
  ASSERT_EQ(layout.units.size(), 2u);
  EXPECT_EQ(layout.units[0].layers, (std::vector<int>{0, 1}));
  EXPECT_EQ(layout.units[0].numel, 2 * 3 + 3 * 4);
  EXPECT_EQ(layout.layers[1].weight_offset, 6);  // registration order: flattened in sequence
  EXPECT_EQ(layout.units[1].layers, (std::vector<int>{2}));
  EXPECT_EQ(layout.layers[2].unit, 1);
  EXPECT_EQ(layout.layers[2].bias_offset, -1);
}

TEST(PlanSharding, EveryStrategyAsShardAndReplicateGroups) {
  v1::FsdpConfig fsdp;
  fsdp.set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  auto full = PlanSharding(fsdp, 4, 1);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->shard_size, 4);
  EXPECT_EQ(full->replicate_size, 1);
  EXPECT_TRUE(full->reshard_after_forward);

  fsdp.set_sharding_strategy(v1::ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_FALSE(PlanSharding(fsdp, 4, 1)->reshard_after_forward);

  fsdp.set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  auto none = PlanSharding(fsdp, 3, 2);
  EXPECT_EQ(none->shard_size, 1);
  EXPECT_EQ(none->replicate_size, 3);
  EXPECT_EQ(none->ReplicateGroupRanks(), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(none->predivide, 2);
  EXPECT_EQ(none->postdivide, 1.5);

  fsdp.set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  fsdp.set_shard_group_size(2);
  auto hybrid = PlanSharding(fsdp, 4, 3);
  EXPECT_EQ(hybrid->shard_rank, 1);
  EXPECT_EQ(hybrid->replicate_rank, 1);
  EXPECT_EQ(hybrid->ShardGroupRanks(), (std::vector<int>{2, 3}));
  EXPECT_EQ(hybrid->ReplicateGroupRanks(), (std::vector<int>{1, 3}));
  EXPECT_TRUE(hybrid->reshard_after_forward);

  // A world of one behaves as NO_SHARD whatever the strategy.
  fsdp.set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  EXPECT_FALSE(PlanSharding(fsdp, 1, 0)->sharded());
  EXPECT_FALSE(PlanSharding(fsdp, 1, 0)->reshard_after_forward);
}

TEST(PaddedNumel, PadsToAMultipleOfTheShardGroup) {
  EXPECT_EQ(PaddedNumel(10, 3), 12);
  EXPECT_EQ(PaddedNumel(12, 3), 12);
  EXPECT_EQ(PaddedNumel(0, 4), 0);
}

}  // namespace
}  // namespace shardwise::fsdp
