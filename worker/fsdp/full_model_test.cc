// Gathering the full model at a job's end: every rank takes part in the all-gathers, and
// only the rank that writes the model copies it to its host. Each follower held a whole
// FP32 copy it threw away: 28 GB for a 7B model, on every rank of a node at once.

#include <vector>

#include "gtest/gtest.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/testing/cpu_rank_model.h"

namespace shardwise::fsdp {
namespace {

TEST(FullModel, OnlyTheRankThatKeepsItCopiesItToItsHost) {
  constexpr int kWorld = 2;
  v1::JobSpec spec;
  for (int w : {6, 16, 12, 5}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(4);
  spec.set_global_batch_size(24);
  spec.set_steps(1);
  spec.set_world_size(kWorld);
  std::vector<TensorMap> gathered(kWorld);
  testing::OnEachRank(spec, [&](int rank, FsdpModel& model) {
    auto full = model.GatherFullModel(/*to_host=*/rank == 0);
    ASSERT_TRUE(full.ok()) << full.status();
    gathered[rank] = *std::move(full);
  });
  // An MLP of three layers, a weight and a bias each, whole: 6x16+16, 16x12+12, 12x5+5.
  int64_t parameters = 0;
  for (const auto& [name, tensor] : gathered[0]) parameters += tensor.numel();
  EXPECT_EQ(gathered[0].size(), 6u);
  EXPECT_EQ(parameters, 112 + 204 + 65);
  EXPECT_TRUE(gathered[1].empty());
}

}  // namespace
}  // namespace shardwise::fsdp
