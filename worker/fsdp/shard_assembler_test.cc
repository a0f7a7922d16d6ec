#include "worker/fsdp/shard_assembler.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/job_spec_defaults.h"
#include "gtest/gtest.h"
#include "worker/data/weights.h"

namespace shardwise::fsdp {
namespace {

v1::JobSpec Gpt() {
  v1::JobSpec spec;
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(33);  // odd sizes, so that units pad
  gpt->set_block_size(8);
  gpt->set_n_layer(2);
  gpt->set_n_head(2);
  gpt->set_n_embd(6);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

v1::JobSpec Mlp() {
  v1::JobSpec spec;
  for (int w : {5, 7, 3}) spec.mutable_model()->add_layer_widths(w);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

ShardingPlan RankOf(int group, int rank) {
  ShardingPlan plan;
  plan.world_size = plan.shard_size = group;
  plan.rank = plan.shard_rank = rank;
  return plan;
}

absl::StatusOr<std::vector<std::vector<float>>> Assemble(const FlatLayout& layout,
                                                         const ShardingPlan& plan,
                                                         const TensorMap& weights) {
  ShardAssembler assembler(layout, plan);
  for (const auto& [name, tensor] : weights) {
    if (absl::Status taken = assembler.Take(name, tensor); !taken.ok()) return taken;
  }
  return std::move(assembler).Finish();
}

class ShardAssemblerTest : public ::testing::TestWithParam<v1::JobSpec> {};

// A rank of one holds each unit's parameters end to end in registration order; the ranks
// of any group hold that, zero-padded, cut into equal shards.
TEST_P(ShardAssemblerTest, TheRanksShardsLaidEndToEndAreTheFlatUnits) {
  const v1::JobSpec spec = GetParam();
  auto layout = BuildFlatLayout(spec.model(), spec.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  const TensorMap weights = SeededWeights(spec.model(), 7);
  auto whole = Assemble(*layout, RankOf(1, 0), weights);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (size_t p = 0; p < layout->model.params.size(); ++p) {
    const ParameterDesc& param = layout->model.params[p];
    const ParameterSlot& slot = layout->slots[p];
    EXPECT_EQ(std::memcmp((*whole)[slot.unit].data() + slot.offset, weights.at(param.name).f32(),
                          param.numel() * sizeof(float)),
              0)
        << param.name;
  }
  for (int group : {2, 3, 4, 5}) {
    std::vector<std::vector<float>> joined(layout->units.size());
    for (int rank = 0; rank < group; ++rank) {
      auto part = Assemble(*layout, RankOf(group, rank), weights);
      ASSERT_TRUE(part.ok()) << part.status();
      for (size_t u = 0; u < joined.size(); ++u) {
        EXPECT_EQ(static_cast<int64_t>((*part)[u].size()),
                  PaddedNumel(layout->units[u].numel, group) / group);
        joined[u].insert(joined[u].end(), (*part)[u].begin(), (*part)[u].end());
      }
    }
    for (size_t u = 0; u < joined.size(); ++u) {
      std::vector<float> padded = (*whole)[u];
      padded.resize(PaddedNumel(layout->units[u].numel, group), 0.0f);
      EXPECT_EQ(joined[u], padded) << "unit " << u << " group " << group;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShardAssemblerTest, ::testing::Values(Gpt(), Mlp()));

// A rank keeps the shard of its place in its shard group, whatever its place in the world:
// rank 3 of HYBRID_SHARD over shard groups of 2 holds what rank 1 of a group of 2 does.
TEST(ShardAssembler, AHybridRankKeepsItsShardGroupsShard) {
  v1::JobSpec spec = Gpt();
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  spec.mutable_fsdp()->set_shard_group_size(2);
  auto layout = BuildFlatLayout(spec.model(), spec.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  auto hybrid = PlanSharding(spec.fsdp(), 4, 3);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  ASSERT_EQ(hybrid->shard_rank, 1);
  const TensorMap weights = SeededWeights(spec.model(), 3);
  auto got = Assemble(*layout, *hybrid, weights);
  auto want = Assemble(*layout, RankOf(2, 1), weights);
  ASSERT_TRUE(got.ok() && want.ok());
  EXPECT_EQ(*got, *want);
}

// The trainer's way: a reader gives each parameter, only what lies in the rank's shard of
// it (read from init.safetensors_path, or generated from init.seed), and each rank holds
// what it would cut from the whole weights.
TEST(ShardAssembler, ReadersGiveEachRankItsPartOfEachParameter) {
  v1::JobSpec file_spec = Gpt();
  file_spec.mutable_init()->set_safetensors_path(testing::ScratchPath("assembler.safetensors"));
  const TensorMap weights = SeededWeights(file_spec.model(), 12);
  ASSERT_TRUE(WriteSafetensors(file_spec.init().safetensors_path(), weights).ok());
  v1::JobSpec seeded_spec = Gpt();
  seeded_spec.mutable_init()->set_seed(12);
  auto layout = BuildFlatLayout(file_spec.model(), file_spec.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const v1::JobSpec* spec : {&file_spec, &seeded_spec}) {
    for (int rank = 0; rank < 3; ++rank) {
      ShardAssembler assembler(*layout, RankOf(3, rank));
      ASSERT_TRUE(InitialWeights(*spec, assembler).ok());
      auto got = std::move(assembler).Finish();
      auto want = Assemble(*layout, RankOf(3, rank), weights);
      ASSERT_TRUE(got.ok() && want.ok());
      EXPECT_EQ(*got, *want) << "rank " << rank << " of 3";
    }
  }
}

// A reader that gives other elements than the rank wants is a bug, not weights.
TEST(ShardAssembler, APieceOtherThanTheOneWantedIsRefused) {
  const v1::JobSpec spec = Mlp();
  auto layout = BuildFlatLayout(spec.model(), spec.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  ShardAssembler assembler(*layout, RankOf(2, 1));
  const ElementRange wanted = assembler.Wanted("2.weight", 21);  // 3 x 7
  ASSERT_FALSE(wanted.empty());
  const std::vector<float> values(21);
  const std::vector<int64_t> shape = {3, 7};
  EXPECT_TRUE(assembler.Take("2.weight", {shape, wanted, values.data()}).ok());
  const absl::Status other = assembler.Take("2.weight", {shape, {0, 21}, values.data()});
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal) << other;
  EXPECT_TRUE(assembler.Wanted("not.a.parameter", 4).empty());
  EXPECT_TRUE(assembler.Wanted("2.weight", 20).empty());  // not its count: Take says so
}

TEST(ShardAssembler, AMissingOrMisshapenParameterIsNamed) {
  const v1::JobSpec spec = Mlp();
  auto layout = BuildFlatLayout(spec.model(), spec.wrap());
  ASSERT_TRUE(layout.ok()) << layout.status();
  TensorMap weights = SeededWeights(spec.model(), 1);
  weights["not.a.parameter"] = F32Tensor({2}, std::vector<float>(2).data());  // passed over
  EXPECT_TRUE(Assemble(*layout, RankOf(2, 1), weights).ok());

  TensorMap missing = weights;
  missing.erase("0.bias");
  absl::Status status = Assemble(*layout, RankOf(2, 1), missing).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "initial weights lack F32 '0.bias' with 7 elements");

  TensorMap misshapen = weights;
  misshapen["2.weight"] = F32Tensor({3, 6}, std::vector<float>(18).data());
  status = Assemble(*layout, RankOf(2, 0), misshapen).status();
  EXPECT_EQ(status.message(), "initial weights lack F32 '2.weight' with 21 elements");
}

}  // namespace
}  // namespace shardwise::fsdp
