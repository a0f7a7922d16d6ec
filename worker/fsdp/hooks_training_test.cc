// Whole training runs with the communication hooks, optimizer overlap, the loss scaler
// and a hook switch at a chosen step. Each rank is a thread running the real trainer over
// real Gloo (testing::TrainInThreads); rank 0 writes the final model, read back here.

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/data/weights.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"

namespace shardwise::fsdp {
namespace {

using Strategy = v1::ShardingStrategy::Value;

v1::JobSpec BaseSpec(Strategy strategy, int world, int steps) {
  v1::JobSpec spec;
  for (int w : {6, 16, 12, 5}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  spec.mutable_data()->mutable_synthetic()->set_seed(7);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(120);
  spec.mutable_init()->set_seed(3);
  spec.set_global_batch_size(24);
  spec.set_steps(steps);
  spec.set_world_size(world);
  return spec;
}

v1::CommHook Hook(v1::CommHook::Hook hook,
                  v1::CommHook::Wrapper wrapper = v1::CommHook::NO_WRAPPER) {
  v1::CommHook h;
  h.set_hook(hook);
  h.set_wrapper(wrapper);
  return h;
}

struct Run {
  TensorMap model;
  testing::ThreadedTraining training;
};

// Trains `spec` and reads back the final model that rank 0 wrote.
absl::StatusOr<Run> TrainAndRead(v1::JobSpec spec, const testing::ThreadedOptions& options = {}) {
  static int runs = 0;
  const std::string path = absl::StrCat(testing::ScratchPath("model-"), runs++, ".safetensors");
  spec.mutable_output()->set_final_model_path(path);
  auto training = testing::TrainInThreads(spec, options);
  if (!training.ok()) return training.status();
  auto model = ReadSafetensors(path);
  if (!model.ok()) return model.status();
  return Run{std::move(*model), std::move(*training)};
}

::testing::AssertionResult BitEqual(const TensorMap& a, const TensorMap& b) {
  return testing::ModelsClose(a, b, 0, 0);
}

// PyTorch's hook tests compare a hooked run with an unhooked one; so do these, over 10
// steps at world 2 and 4.
TEST(HookTraining, NoShardFp16CompressMatchesNoHookWithinFp16Tolerance) {
  for (int world : {2, 4}) {
    v1::JobSpec plain = BaseSpec(v1::ShardingStrategy::NO_SHARD, world, 10);
    v1::JobSpec hooked = plain;
    *hooked.mutable_comm_hook() = Hook(v1::CommHook::FP16_COMPRESS);
    auto a = TrainAndRead(plain);
    auto b = TrainAndRead(hooked);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_TRUE(testing::ModelsClose(b->model, a->model, 1e-3, 1e-4)) << "world " << world;
    // Not trivially equal: the hook really compressed.
    EXPECT_FALSE(BitEqual(b->model, a->model)) << "world " << world;
    EXPECT_EQ(b->training.rank0_last_progress.comm_hook().hook(), v1::CommHook::FP16_COMPRESS);
  }
}

TEST(HookTraining, ShardedBf16CompressMatchesNoHookWithinBf16Tolerance) {
  for (Strategy strategy :
       {v1::ShardingStrategy::FULL_SHARD, v1::ShardingStrategy::SHARD_GRAD_OP}) {
    v1::JobSpec plain = BaseSpec(strategy, 3, 10);
    v1::JobSpec hooked = plain;
    *hooked.mutable_comm_hook() = Hook(v1::CommHook::BF16_COMPRESS);
    auto a = TrainAndRead(plain);
    auto b = TrainAndRead(hooked);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_TRUE(testing::ModelsClose(b->model, a->model, 1.6e-2, 1e-3));
    EXPECT_FALSE(BitEqual(b->model, a->model));
    // The reduce-scatter moved BF16: half the bytes of the FP32 run.
    EXPECT_EQ(2 * b->training.rank0_last_progress.reduce_scatter_bytes(),
              a->training.rank0_last_progress.reduce_scatter_bytes());
  }
}

// DDP's mixed-precision hook against FSDP's own NO_SHARD mixed precision: the same
// BF16 compute, gradients reduced in FP32 by both, divided by N after the sum instead
// of by the pre/post factors around it.
TEST(HookTraining, MixedPrecisionHookMatchesFsdpMixedPrecision) {
  v1::JobSpec fsdp_mp = BaseSpec(v1::ShardingStrategy::NO_SHARD, 2, 10);
  fsdp_mp.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  fsdp_mp.mutable_fsdp()->mutable_mixed_precision()->set_reduce_dtype(v1::FP32);
  v1::JobSpec hooked = fsdp_mp;
  *hooked.mutable_comm_hook() = Hook(v1::CommHook::MIXED_PRECISION);
  auto a = TrainAndRead(fsdp_mp);
  auto b = TrainAndRead(hooked);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_TRUE(testing::ModelsClose(b->model, a->model, 1.6e-2, 1e-3));
  EXPECT_LT(b->training.rank0.last_loss, b->training.rank0.first_loss);
  EXPECT_FALSE(BitEqual(b->model, a->model));
}

struct OverlapCase {
  Strategy strategy;
  bool adamw;
  v1::OptimizerOverlap::Mode mode;
  std::vector<std::string> params;  // HOOK_THEN_OPTIMIZER's subset; empty: all
};

void PrintTo(const OverlapCase& c, std::ostream* os) {
  *os << v1::ShardingStrategy::Value_Name(c.strategy) << (c.adamw ? " AdamW " : " SGD ")
      << v1::OptimizerOverlap::Mode_Name(c.mode) << " [" << absl::StrJoin(c.params, ",") << "]";
}

class OptimizerOverlapTest : public ::testing::TestWithParam<OverlapCase> {};

// docs/semantics.md, "Communication hooks" (optimizer overlap): after several iterations the
// parameters equal those of a normal optimizer step after backward, and they have changed. The
// arithmetic per element is the same, so equal means bit for bit.
TEST_P(OptimizerOverlapTest, SixIterationsEqualTheNormalStep) {
  const OverlapCase& c = GetParam();
  v1::JobSpec normal = BaseSpec(c.strategy, 2, 6);
  if (c.adamw) normal.mutable_optimizer()->mutable_adamw()->set_lr(0.01);
  v1::JobSpec overlapped = normal;
  overlapped.mutable_optimizer()->mutable_overlap()->set_mode(c.mode);
  for (const std::string& p : c.params)
    overlapped.mutable_optimizer()->mutable_overlap()->add_params(p);
  auto a = TrainAndRead(normal);
  auto b = TrainAndRead(overlapped);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_TRUE(BitEqual(b->model, a->model));
  auto initial = InitialWeights(normal);
  ASSERT_TRUE(initial.ok());
  for (const auto& [name, tensor] : *initial) {
    EXPECT_NE(std::memcmp(tensor.f32(), b->model.at(name).f32(), tensor.numel() * sizeof(float)), 0)
        << name << " did not change";
  }
}

INSTANTIATE_TEST_SUITE_P(
    ModesStrategiesOptimizers, OptimizerOverlapTest,
    ::testing::Values(
        OverlapCase{
            v1::ShardingStrategy::NO_SHARD, false, v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER, {}},
        OverlapCase{v1::ShardingStrategy::NO_SHARD, true, v1::OptimizerOverlap::IN_BACKWARD, {}},
        OverlapCase{v1::ShardingStrategy::NO_SHARD,
                    false,
                    v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER,
                    {"0.weight", "2.bias"}},
        OverlapCase{v1::ShardingStrategy::FULL_SHARD,
                    true,
                    v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER,
                    {"2.weight", "4.bias"}},
        OverlapCase{v1::ShardingStrategy::FULL_SHARD, false, v1::OptimizerOverlap::IN_BACKWARD, {}},
        OverlapCase{
            v1::ShardingStrategy::SHARD_GRAD_OP, true, v1::OptimizerOverlap::IN_BACKWARD, {}}));

// An inf in one rank's inputs at chosen steps: the loss scaler finds it (on that rank),
// the all-reduced flag makes every rank skip those steps and back off, and the model
// equals a run without a scaler in which those steps are skipped by hand. Scaling by
// powers of two is exact in FP32, so equal means bit for bit.
TEST(GradScalerTraining, InjectedInfSkipsTheStepOnEveryRank) {
  const std::set<int64_t> bad_steps = {3, 7};
  for (Strategy strategy : {v1::ShardingStrategy::FULL_SHARD, v1::ShardingStrategy::NO_SHARD}) {
    v1::JobSpec scaled = BaseSpec(strategy, 2, 12);
    scaled.mutable_grad_scaler()->set_enabled(true);
    testing::ThreadedOptions inject;
    inject.faults = [&](int rank) {
      TrainingFaults faults;
      if (rank == 1) {
        faults.corrupt_inputs = [&](int64_t step, int, MicroBatch* batch) {
          if (bad_steps.count(step) > 0) batch->inputs[0] = std::numeric_limits<float>::infinity();
        };
      }
      return faults;
    };
    v1::JobSpec by_hand = BaseSpec(strategy, 2, 12);
    testing::ThreadedOptions skip;
    skip.faults = [&](int) {
      TrainingFaults faults;
      faults.skip_steps = bad_steps;
      return faults;
    };
    auto a = TrainAndRead(scaled, inject);
    auto b = TrainAndRead(by_hand, skip);
    auto clean = TrainAndRead(BaseSpec(strategy, 2, 12));
    ASSERT_TRUE(a.ok() && b.ok() && clean.ok()) << a.status() << b.status() << clean.status();
    EXPECT_TRUE(BitEqual(a->model, b->model)) << v1::ShardingStrategy::Value_Name(strategy);
    EXPECT_FALSE(BitEqual(a->model, clean->model));
    const v1::GradScalerState& state = a->training.rank0_last_progress.grad_scaler();
    EXPECT_EQ(state.scale(), 65536.0 * 0.5 * 0.5);
    EXPECT_EQ(state.skipped_steps(), 2);
    EXPECT_EQ(state.growth_tracker(), 4);  // steps 8-11 were clean
  }
}

// A switch to BF16_COMPRESS at step 5, agreed from the start: the first 5 steps are the
// unhooked run's exactly, the later ones are not, and rank 0 reports the new hook.
TEST(HookSwitch, ChangesTheHookAtTheAgreedStepOnEveryRank) {
  v1::JobSpec spec = BaseSpec(v1::ShardingStrategy::FULL_SHARD, 2, 10);
  testing::ThreadedOptions switched;
  switched.hook_switches = {{5, Hook(v1::CommHook::BF16_COMPRESS)}};
  auto a = TrainAndRead(spec, switched);
  auto b = TrainAndRead(spec);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  const std::vector<double>& with = a->training.rank0_losses;
  const std::vector<double>& without = b->training.rank0_losses;
  ASSERT_EQ(with.size(), 10u);
  ASSERT_EQ(without.size(), 10u);
  // Step 5's loss is computed before its reduction, so it still matches.
  for (int step = 0; step <= 5; ++step) EXPECT_EQ(with[step], without[step]) << step;
  EXPECT_NE(with[7], without[7]);
  EXPECT_EQ(a->training.rank0_last_progress.comm_hook().hook(), v1::CommHook::BF16_COMPRESS);
  EXPECT_FALSE(BitEqual(a->model, b->model));
}

}  // namespace
}  // namespace shardwise::fsdp
