// The FSDP runtime on the GPU against the same jobs on the CPU: the real trainer, each
// rank a thread (shardwise::testing::TrainInThreads), on a CudaDevice with NCCL at world size 1 and
// with host-staged Gloo at world size 2 (two ranks sharing the one GPU). FP32 with TF32
// off must end with the same model within rtol 1e-4; BF16 mixed precision must follow
// the CPU's loss curve within BF16 tolerance.

#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/cuda/cuda_rank_device.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"

namespace shardwise::cuda {
namespace {

using Strategy = v1::ShardingStrategy::Value;

struct Config {
  Strategy strategy;
  int world;
  v1::CudaOptions::Collectives collectives;
  bool adamw = false;
  int accumulation = 1;
  double max_grad_norm = 0;
  v1::Loss loss = v1::CROSS_ENTROPY;
  v1::Dtype param_dtype = v1::DTYPE_UNSPECIFIED;    // BF16: mixed precision
  v1::CommHook::Hook hook = v1::CommHook::NO_HOOK;  // DDP's hooks on NO_SHARD
};

std::string Name(const Config& c) {
  return absl::StrCat(
      v1::ShardingStrategy::Value_Name(c.strategy), "_world", c.world, "_",
      v1::CudaOptions::Collectives_Name(c.collectives), c.adamw ? "_adamw" : "_sgd", "_accum",
      c.accumulation, c.max_grad_norm > 0 ? "_clip" : "", c.loss == v1::MSE ? "_mse" : "",
      c.param_dtype == v1::BF16 ? "_bf16" : "",
      c.hook != v1::CommHook::NO_HOOK ? absl::StrCat("_", v1::CommHook::Hook_Name(c.hook)) : "");
}

std::string TempPath(const std::string& name) {
  return shardwise::testing::ScratchPath(absl::StrCat(name, ".safetensors"));
}

v1::JobSpec SpecFor(const Config& c, v1::DeviceKind device, const std::string& model_path) {
  v1::JobSpec spec;
  for (int w : {24, 64, 48, 10}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_model()->set_activation(v1::GELU);
  spec.mutable_wrap()->set_layers_per_unit(1);
  spec.mutable_fsdp()->set_sharding_strategy(c.strategy);
  // PyTorch's default, as the coordinator's: on the GPU each unshard waits for the oldest
  // of two pending frees (the rate limiter), so the parity covers it.
  spec.mutable_fsdp()->set_limit_all_gathers(true);
  if (c.strategy == v1::ShardingStrategy::HYBRID_SHARD) {
    spec.mutable_fsdp()->set_shard_group_size(1);  // shard groups of one, replicated twice
  }
  if (c.param_dtype != v1::DTYPE_UNSPECIFIED) {
    spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(c.param_dtype);
  }
  if (c.adamw) {
    spec.mutable_optimizer()->mutable_adamw()->set_lr(0.01);
  } else {
    spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
    spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
    spec.mutable_optimizer()->mutable_sgd()->set_weight_decay(1e-4);
  }
  spec.mutable_optimizer()->set_max_grad_norm(c.max_grad_norm);
  spec.mutable_comm_hook()->set_hook(c.hook);
  spec.set_loss(c.loss);
  spec.mutable_data()->mutable_synthetic()->set_seed(11);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(256);
  spec.mutable_init()->set_seed(5);
  spec.set_global_batch_size(32);
  spec.set_steps(20);
  spec.set_gradient_accumulation_steps(c.accumulation);
  spec.set_world_size(c.world);
  spec.set_device(device);
  if (device == v1::CUDA) spec.mutable_cuda()->set_collectives(c.collectives);
  spec.mutable_output()->set_final_model_path(model_path);
  return spec;
}

class FsdpGpuParityTest : public ::testing::TestWithParam<Config> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(FsdpGpuParityTest, GpuRunMatchesTheCpuRun) {
  const Config& c = GetParam();
  const std::string cpu_path = TempPath(Name(c) + "-cpu");
  const std::string gpu_path = TempPath(Name(c) + "-gpu");
  auto cpu = shardwise::testing::TrainInThreads(SpecFor(c, v1::CPU, cpu_path));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  shardwise::testing::ThreadedOptions options;
  options.make_device = CudaRankDevices(0);
  auto gpu = shardwise::testing::TrainInThreads(SpecFor(c, v1::CUDA, gpu_path), options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();

  ASSERT_EQ(gpu->rank0_losses.size(), cpu->rank0_losses.size());
  const bool bf16 = c.param_dtype == v1::BF16;
  for (size_t i = 0; i < cpu->rank0_losses.size(); ++i) {
    // BF16 keeps 8 bits: rounding decisions may differ where the GEMMs' FP32 sums differ
    // in their last bits, and the difference grows a little over the steps.
    const double tolerance = bf16 ? 2e-2 : 1e-4;
    EXPECT_NEAR(gpu->rank0_losses[i], cpu->rank0_losses[i],
                tolerance * std::fabs(cpu->rank0_losses[i]))
        << "step " << i + 1;
  }
  EXPECT_LT(cpu->rank0_losses.back(), cpu->rank0_losses.front()) << "the job did not train";

  auto cpu_model = ReadSafetensors(cpu_path);
  auto gpu_model = ReadSafetensors(gpu_path);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status();
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status();
  if (bf16) {
    EXPECT_TRUE(shardwise::testing::ModelsClose(*gpu_model, *cpu_model, 5e-2, 5e-3));
  } else {
    EXPECT_TRUE(shardwise::testing::ModelsClose(*gpu_model, *cpu_model, 1e-4, 1e-5));
  }
  // The device communicators carried the FSDP traffic: the same bytes as on the CPU.
  EXPECT_EQ(gpu->rank0_last_progress.all_gather_bytes(),
            cpu->rank0_last_progress.all_gather_bytes());
  EXPECT_EQ(gpu->rank0_last_progress.reduce_scatter_bytes(),
            cpu->rank0_last_progress.reduce_scatter_bytes());
}

constexpr auto kNccl = v1::CudaOptions::NCCL;
constexpr auto kStaged = v1::CudaOptions::HOST_STAGED_GLOO;
constexpr auto kFull = v1::ShardingStrategy::FULL_SHARD;
constexpr auto kGradOp = v1::ShardingStrategy::SHARD_GRAD_OP;
constexpr auto kNoShard = v1::ShardingStrategy::NO_SHARD;
constexpr auto kHybrid = v1::ShardingStrategy::HYBRID_SHARD;

INSTANTIATE_TEST_SUITE_P(
    Jobs, FsdpGpuParityTest,
    ::testing::Values(
        // NCCL at world size 1.
        Config{kFull, 1, kNccl}, Config{kGradOp, 1, kNccl, true, 1, 1.0},
        Config{kNoShard, 1, kNccl, true, 2}, Config{kFull, 1, kNccl, false, 1, 0, v1::MSE},
        Config{kFull, 1, kNccl, true, 1, 0, v1::CROSS_ENTROPY, v1::BF16},
        // DDP's compress hook: the replicate group's all-reduce on its own stream.
        Config{kNoShard, 1, kNccl, false, 1, 0, v1::CROSS_ENTROPY, v1::DTYPE_UNSPECIFIED,
               v1::CommHook::FP16_COMPRESS},
        // Host-staged Gloo, two ranks on one GPU.
        Config{kFull, 2, kStaged}, Config{kGradOp, 2, kStaged, true, 2, 1.0},
        Config{kNoShard, 2, kStaged, true}, Config{kHybrid, 2, kStaged},
        Config{kFull, 2, kStaged, false, 1, 0, v1::CROSS_ENTROPY, v1::BF16}),
    [](const ::testing::TestParamInfo<Config>& info) { return Name(info.param); });

}  // namespace
}  // namespace shardwise::cuda
