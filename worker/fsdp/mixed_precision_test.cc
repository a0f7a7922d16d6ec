// FSDP MixedPrecision: which dtype every collective moves (a recording communicator is the
// probe), and training in BF16/FP16 against the FP32 reference.

#include <cmath>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/comm/data_plane.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/solo_communicator.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/data/weights.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/fsdp/reference_training.h"
#include "worker/testing/cpu_rank_model.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/plan_groups.h"
#include "worker/testing/recording_communicator.h"
#include "worker/testing/threaded_training.h"

namespace shardwise::fsdp {
namespace {

using Strategy = v1::ShardingStrategy::Value;

v1::JobSpec Spec(Strategy strategy, int world, v1::Dtype param, v1::Dtype reduce, bool keep) {
  v1::JobSpec spec;
  for (int w : {6, 16, 12, 5}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  if (strategy == v1::ShardingStrategy::HYBRID_SHARD) spec.mutable_fsdp()->set_shard_group_size(2);
  auto* mp = spec.mutable_fsdp()->mutable_mixed_precision();
  mp->set_param_dtype(param);
  mp->set_reduce_dtype(reduce);
  mp->set_keep_low_precision_grads(keep);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  spec.mutable_data()->mutable_synthetic()->set_seed(4);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(96);
  spec.set_global_batch_size(24);
  spec.set_steps(20);
  spec.set_world_size(world);
  return spec;
}

ScalarType TypeOf(v1::Dtype dtype) {
  return dtype == v1::BF16   ? ScalarType::kBFloat16
         : dtype == v1::FP16 ? ScalarType::kFloat16
                             : ScalarType::kFloat32;
}

struct ProbeCase {
  Strategy strategy;
  int world;
  v1::Dtype param, reduce;  // as written in the spec (UNSPECIFIED: the default rule)
  bool keep;
};

class DtypeProbe : public ::testing::TestWithParam<ProbeCase> {};

TEST_P(DtypeProbe, AllGathersInParamDtypeReductionsInReduceDtype) {
  const ProbeCase& c = GetParam();
  const v1::JobSpec spec = Spec(c.strategy, c.world, c.param, c.reduce, c.keep);
  const ScalarType param = TypeOf(c.param == v1::DTYPE_UNSPECIFIED ? v1::FP32 : c.param);
  const ScalarType reduce = TypeOf(c.reduce != v1::DTYPE_UNSPECIFIED  ? c.reduce
                                   : c.param != v1::DTYPE_UNSPECIFIED ? c.param
                                                                      : v1::FP32);
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> ranks;
  ranks.reserve(c.world);
  for (int r = 0; r < c.world; ++r) {
    ranks.emplace_back([&, r] {
      auto plan = PlanSharding(spec.fsdp(), c.world, r);
      ASSERT_TRUE(plan.ok());
      auto groups = testing::ConnectPlanGroups(store, *plan, r);
      ASSERT_TRUE(groups.ok()) << groups.status();
      testing::RecordingCommunicator shard_probe(groups->shard.get()),
          replicate_probe(groups->replicate.get());
      CpuCachingAllocator allocator;
      CpuDevice device(&allocator);
      auto model = FsdpModel::Create(spec, *plan, {&shard_probe, &replicate_probe}, &device,
                                     SeededWeights(spec.model(), 0));
      ASSERT_TRUE(model.ok()) << model.status();
      double loss = 0;  // the CPU device's memory is the host's
      const absl::Status step =
          (*model)->ForwardBackward(testing::SixRowsOfQuarters(), 1.0f, true, &loss);
      ASSERT_TRUE(step.ok()) << step;
      int gathers = 0, reductions = 0;
      for (const auto& [op, type] : shard_probe.calls()) {
        if (op == "all-gather") {
          ++gathers;
          EXPECT_EQ(type, param) << "rank " << r << ": all-gather in " << ScalarTypeName(type);
        } else {
          ++reductions;
          EXPECT_EQ(type, reduce) << "rank " << r << ": " << op << " in " << ScalarTypeName(type);
        }
      }
      for (const auto& [op, type] : replicate_probe.calls()) {
        ++reductions;
        EXPECT_EQ(op, "all-reduce");
        EXPECT_EQ(type, reduce) << "rank " << r << ": replicate " << op << " in "
                                << ScalarTypeName(type);
      }
      EXPECT_EQ(gathers > 0, plan->sharded()) << "rank " << r;
      EXPECT_GT(reductions, 0) << "rank " << r;
    });
  }
  for (auto& t : ranks) t.join();
}

INSTANTIATE_TEST_SUITE_P(
    Configurations, DtypeProbe,
    ::testing::Values(
        ProbeCase{v1::ShardingStrategy::FULL_SHARD, 2, v1::BF16, v1::DTYPE_UNSPECIFIED, false},
        ProbeCase{v1::ShardingStrategy::FULL_SHARD, 3, v1::FP16, v1::FP32, false},
        ProbeCase{v1::ShardingStrategy::SHARD_GRAD_OP, 2, v1::DTYPE_UNSPECIFIED, v1::BF16, false},
        ProbeCase{v1::ShardingStrategy::NO_SHARD, 2, v1::BF16, v1::BF16, true},
        ProbeCase{v1::ShardingStrategy::HYBRID_SHARD, 4, v1::BF16, v1::FP16, false},
        ProbeCase{v1::ShardingStrategy::FULL_SHARD, 2, v1::FP32, v1::FP32, false}));

// keep_low_precision_grads: the gradient shards hold param_dtype values, as torch's FP16
// gradients do, through the loss scaler's unscale: one unscaled into FP16's subnormals
// rounds there (torch unscales an FP16 gradient in place, in its type).
TEST(KeptLowPrecisionGradients, StayInParamDtypeThroughTheUnscale) {
  const v1::JobSpec spec =
      Spec(v1::ShardingStrategy::NO_SHARD, 1, v1::FP16, v1::DTYPE_UNSPECIFIED, true);
  gloo::rendezvous::HashStore store;
  auto rank = testing::CpuRankModel::Create(store, spec, 0);
  ASSERT_TRUE(rank.ok()) << rank.status();
  FsdpModel& model = (*rank)->model();
  double loss = 0;
  ASSERT_TRUE(model.ForwardBackward(testing::SixRowsOfQuarters(), 1.0f, true, &loss).ok());
  ASSERT_TRUE(model.UnscaleGradients(std::ldexp(1.0f, -14)).ok());
  int subnormal = 0;
  for (int u = 0; u < model.num_units(); ++u) {
    auto grads = model.GradientShardToHost(u);
    ASSERT_TRUE(grads.ok()) << grads.status();
    std::vector<float> rounded = *grads;
    cpu::RoundToPrecision(ScalarType::kFloat16, rounded.data(), rounded.size());
    EXPECT_EQ(*grads, rounded) << "unit " << u << " holds values FP16 cannot";
    for (float g : *grads) subnormal += g != 0 && std::abs(g) < 6.1e-5f;
  }
  EXPECT_GT(subnormal, 0) << "no gradient reached FP16's subnormals: the test shows nothing";
}

class LowPrecisionTraining : public ::testing::TestWithParam<v1::Dtype> {};

TEST_P(LowPrecisionTraining, StaysWithinTheDtypesToleranceOfFp32AndHalvesTheGather) {
  const v1::Dtype dtype = GetParam();
  v1::JobSpec low = Spec(v1::ShardingStrategy::FULL_SHARD, 2, dtype, v1::DTYPE_UNSPECIFIED, false);
  low.mutable_output()->set_final_model_path(
      absl::StrCat(testing::ScratchRoot(), "/mp-", v1::Dtype_Name(dtype), ".safetensors"));
  v1::JobSpec full = low;
  full.mutable_fsdp()->clear_mixed_precision();
  // Its own file: writing the FP32 run's model over the low-precision one (as this test
  // once did, and then checked the FP32 model) is refused now.
  full.mutable_output()->set_final_model_path(low.output().final_model_path() + ".fp32");
  auto low_run = testing::TrainInThreads(low);
  auto full_run = testing::TrainInThreads(full);
  ASSERT_TRUE(low_run.ok()) << low_run.status();
  ASSERT_TRUE(full_run.ok()) << full_run.status();
  // The all-gather moved 2-byte elements instead of 4.
  EXPECT_EQ(low_run->rank0_last_progress.all_gather_bytes() * 2,
            full_run->rank0_last_progress.all_gather_bytes());
  EXPECT_EQ(low_run->rank0_last_progress.reduce_scatter_bytes() * 2,
            full_run->rank0_last_progress.reduce_scatter_bytes());
  // The loss falls, and follows the FP32 run within the dtype's tolerance.
  EXPECT_LT(low_run->rank0_losses.back(), low_run->rank0_losses.front());
  auto reference = TrainReference(full);
  ASSERT_TRUE(reference.ok());
  auto trained = ReadSafetensors(low.output().final_model_path());
  ASSERT_TRUE(trained.ok()) << trained.status();
  // PyTorch's test tolerances (docs/semantics.md): bf16 rtol 1.6e-2, fp16 rtol 1e-3; 20
  // steps of rounding accumulate, so each tensor is held to 2x those as a relative L2
  // distance (element by element, low-precision runs are not comparable), and the loss
  // to the plain tolerance of its dtype.
  const double rtol = dtype == v1::BF16 ? 1.6e-2 : 1e-3;
  double worst = 0;
  EXPECT_TRUE(testing::TensorsCloseL2(*trained, reference->model, 2 * rtol, &worst));
  std::printf("%s: worst tensor's relative L2 distance %.3g (bound %.3g)\n",
              v1::Dtype_Name(dtype).c_str(), worst, 2 * rtol);
  bool differs = false;
  for (const auto& [name, want] : reference->model)
    differs |= trained->at(name).bytes != want.bytes;
  EXPECT_TRUE(differs) << "low precision left no trace: were the roundings applied?";
  EXPECT_NEAR(low_run->rank0_losses.back(), reference->losses.back(),
              rtol * reference->losses.back() + 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LowPrecisionTraining, ::testing::Values(v1::BF16, v1::FP16),
                         [](const auto& info) { return v1::Dtype_Name(info.param); });

}  // namespace
}  // namespace shardwise::fsdp
