#include "contracts/fsdp_layout.h"

#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

v1::ModelSpec Model(const std::vector<int>& widths, bool bias = true) {
  v1::ModelSpec model;
  for (int w : widths) model.add_layer_widths(w);
  model.set_bias(bias);
  return model;
}

TEST(DivideFactors, MatchSemantics) {
  // docs/semantics.md: N=2 -> (2, 1); 3 -> (2, 1.5); 4 -> (2, 2); 6 -> (4, 1.5); 8 -> (4, 2);
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

TEST(BuildFlatLayout, EachLinearItsOwnUnitByDefault) {
  v1::WrapPolicy wrap;
  auto layout = BuildFlatLayout(Model({4, 8, 3}), wrap);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->units.size(), 3u);  // two children and an empty root
  EXPECT_EQ(layout->units[0].numel, 4 * 8 + 8);
  EXPECT_EQ(layout->units[1].numel, 8 * 3 + 3);
  EXPECT_TRUE(layout->units[2].is_root);
  EXPECT_FALSE(layout->units[2].has_stages());
  const int weight = layout->model.FindParameter("2.weight");
  const int bias = layout->model.FindParameter("2.bias");
  EXPECT_EQ(layout->slots[weight].unit, 1);
  EXPECT_EQ(layout->slots[weight].offset, 0);
  EXPECT_EQ(layout->slots[bias].offset, 24);
}

TEST(BuildFlatLayout, LeftoverLayersBelongToTheRoot) {
  v1::WrapPolicy wrap;
  wrap.set_layers_per_unit(2);
  auto layout = BuildFlatLayout(Model({2, 3, 4, 5}, /*bias=*/false), wrap);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->units.size(), 2u);
  EXPECT_EQ(layout->units[0].first_stage, 0);
  EXPECT_EQ(layout->units[0].last_stage, 1);
  EXPECT_EQ(layout->units[0].numel, 2 * 3 + 3 * 4);
  EXPECT_EQ(layout->slots[layout->model.FindParameter("2.weight")].offset, 6);  // in sequence
  EXPECT_EQ(layout->units[1].first_stage, 2);
  EXPECT_EQ(layout->slots[layout->model.FindParameter("4.weight")].unit, 1);
  EXPECT_EQ(layout->model.FindParameter("4.bias"), -1);
}

// FSDP's root flat parameter holds what no block holds, in registration order:
// wte, wpe, ln_f; it runs the embeddings first and the final norm and head last.
TEST(BuildFlatLayout, GptBlocksAreUnitsAndTheRootHoldsTheRest) {
  v1::ModelSpec model;
  v1::GptConfig* gpt = model.mutable_gpt();
  gpt->set_vocab_size(11);
  gpt->set_block_size(5);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(4);
  auto layout = BuildFlatLayout(model, v1::WrapPolicy());
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->units.size(), 3u);
  const UnitLayout& root = layout->units[2];
  ASSERT_EQ(root.params.size(), 4u);
  EXPECT_EQ(layout->model.params[root.params[0]].name, "transformer.wte.weight");
  EXPECT_EQ(layout->model.params[root.params[1]].name, "transformer.wpe.weight");
  EXPECT_EQ(layout->model.params[root.params[2]].name, "transformer.ln_f.weight");
  EXPECT_EQ(layout->slots[root.params[1]].offset, 11 * 4);
  EXPECT_EQ(root.numel, 11 * 4 + 5 * 4 + 4 + 4);
  EXPECT_EQ(root.first_stage, 0);
  EXPECT_EQ(root.last_stage, 5);  // wte, wpe, h.0, h.1, ln_f, lm_head
  // A block: two LayerNorms (8 + 8), c_attn (48 + 12), c_proj (16 + 4), c_fc (64 + 16),
  // mlp c_proj (64 + 4).
  EXPECT_EQ(layout->units[0].numel, 8 + 8 + 60 + 20 + 80 + 68);
  EXPECT_EQ(layout->units[1].first_stage, 3);
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

// A parameter against the shards it straddles: what each shard keeps of it.
TEST(ElementRange, ShardsKeepWhatOfAParameterLiesInThem) {
  const ElementRange param = {5, 13};  // elements 5..12 of a unit cut into shards of 4
  EXPECT_EQ(Intersect(param, ShardElements(0, 4)).size(), 0);
  EXPECT_TRUE(Intersect(param, ShardElements(0, 4)).empty());
  const ElementRange first = Intersect(param, ShardElements(1, 4));
  EXPECT_EQ(first.begin, 5);
  EXPECT_EQ(first.end, 8);
  const ElementRange whole = Intersect(param, ShardElements(2, 4));
  EXPECT_EQ(whole.begin, 8);
  EXPECT_EQ(whole.end, 12);
  EXPECT_EQ(Intersect(param, ShardElements(3, 4)).size(), 1);
  EXPECT_TRUE(Intersect(param, ShardElements(4, 4)).empty());
  EXPECT_EQ(ShardElements(3, 1 << 30).begin, int64_t{3} << 30);  // no int overflow
}

}  // namespace
}  // namespace shardwise::fsdp
