// Gathering the full model at a job's end: every rank takes part in the all-gathers, and
// only the rank that writes the model copies it to its host. Each follower held a whole
// FP32 copy it threw away: 28 GB for a 7B model, on every rank of a node at once. The
// writer reads it a unit at a time (FullModelStream): it held all of it too.

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/fsdp/full_model_stream.h"
#include "worker/testing/cpu_rank_model.h"
#include "worker/testing/token_corpus.h"

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

v1::JobSpec TwoRankGpt() {
  v1::JobSpec spec;
  *spec.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
  spec.mutable_model()->mutable_gpt()->set_n_layer(4);
  spec.mutable_wrap()->add_modules(v1::WrapModule::BLOCK);  // a unit a block
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.set_global_batch_size(4);
  spec.set_steps(1);
  spec.set_world_size(2);
  return spec;
}

// The writer reads the model in name order (a file's), a tensor at a time: each the
// gathered one, while it holds the root unit and one block at most; the other rank makes
// the same gathers without reading.
TEST(FullModel, TheWriterReadsAUnitAtATime) {
  const v1::JobSpec spec = TwoRankGpt();
  TensorMap whole, streamed;
  int64_t held = 0, root = 0, largest_block = 0;
  testing::OnEachRank(spec, [&](int rank, FsdpModel& model) {
    auto full = model.GatherFullModel(/*to_host=*/rank == 0);
    ASSERT_TRUE(full.ok()) << full.status();
    std::vector<std::string> names;
    for (const ParameterDesc& param : model.layout().model.params) names.push_back(param.name);
    std::sort(names.begin(), names.end());
    auto stream = FullModelStream::Make(&model, names, /*to_host=*/rank == 0);
    ASSERT_TRUE(stream.ok()) << stream.status();
    if (rank == 0) {
      whole = *std::move(full);
      for (const std::string& name : names) {
        auto tensor = stream->Next(name);
        ASSERT_TRUE(tensor.ok()) << tensor.status();
        streamed[name] = *std::move(tensor);
      }
      EXPECT_EQ(stream->Next(names[0]).status().code(), absl::StatusCode::kInternal);
      for (int u = 0; u < model.num_units(); ++u) {
        if (u == model.layout().root_unit()) root = model.padded_numel(u);
        if (u != model.layout().root_unit()) {
          largest_block = std::max(largest_block, model.padded_numel(u));
        }
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
    if (rank == 0) held = stream->peak_held_floats();
  });
  ASSERT_EQ(streamed.size(), whole.size());
  for (const auto& [name, tensor] : whole) {
    EXPECT_EQ(streamed[name].shape, tensor.shape) << name;
    EXPECT_EQ(streamed[name].bytes, tensor.bytes) << name;
  }
  int64_t total = 0;
  for (const auto& [name, tensor] : whole) total += tensor.numel();
  EXPECT_GT(held, 0);
  EXPECT_GT(largest_block, 0);
  EXPECT_LE(held, root + largest_block);
  EXPECT_LT(held, total);
}

TEST(FullModel, AReadPlanNamesWhatTheModelLacks) {
  testing::OnEachRank(TwoRankGpt(), [&](int rank, FsdpModel& model) {
    const std::string first = model.layout().model.params[0].name;
    EXPECT_EQ(PlanFullModelRead(model.layout(), {"no.such.weight"}).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(PlanFullModelRead(model.layout(), {first, first}).status().code(),
              absl::StatusCode::kInvalidArgument);
    // Read out of the plan's order: refused, nothing gathered (the ranks stay in step).
    auto stream = FullModelStream::Make(&model, {first}, rank == 0);
    ASSERT_TRUE(stream.ok());
    if (rank == 0) EXPECT_EQ(stream->Next("other").status().code(), absl::StatusCode::kInternal);
    EXPECT_TRUE(stream->Finish().ok());
  });
}

}  // namespace
}  // namespace shardwise::fsdp
