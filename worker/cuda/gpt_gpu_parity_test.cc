// A GPT (and a Llama: grouped-query attention, llama3 rotary scaling, SwiGLU, an untied
// head) trained by the FSDP runtime on the GPU against the same job on the CPU: the real
// trainer, each rank a thread (testing::TrainInThreads), on a CudaDevice. FP32 with TF32
// off ends with the same model within rtol 1e-4 (with and without activation
// checkpointing, with materialised and with fused attention, with GELU in the GEMM's
// epilogue); BF16 mixed precision follows the CPU's loss curve within BF16 tolerance, with
// FP32 or 16-bit storage (cuda.storage); two ranks on one GPU over host-staged Gloo equal
// one rank over NCCL on the same global batch; the caching allocator's peaks are what the
// memory estimate says.

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/memory_estimate.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/cuda/cuda_rank_device.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/testing/memory_expectations.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise::cuda {
namespace {

struct GptConfig {
  int world;
  v1::CudaOptions::Collectives collectives;
  bool bf16 = false;
  bool checkpointing = false;
  bool fused_attention = false;
  bool llama = false;
  bool storage16 = false;  // cuda.storage STORAGE_PARAM_DTYPE (with bf16)
  // The GPT's MLP in GELU_TANH, the form cuBLASLt's GELU epilogue computes: its first
  // Linear and GELU in one GEMM on the GPU (gemm_epilogue.h), one by one on the CPU.
  bool gelu_tanh = false;
};

std::string Name(const GptConfig& c) {
  return absl::StrCat("world", c.world, "_", v1::CudaOptions::Collectives_Name(c.collectives),
                      c.bf16 ? "_bf16" : "", c.checkpointing ? "_checkpointing" : "",
                      c.fused_attention ? "_fused_attention" : "", c.llama ? "_llama" : "",
                      c.storage16 ? "_storage16" : "", c.gelu_tanh ? "_gelu_tanh" : "");
}

std::string TempDir(const std::string& name) {
  const std::string dir = shardwise::testing::ScratchPath(name);
  std::filesystem::create_directories(dir);
  return dir;
}

constexpr int kSteps = 15;
constexpr int64_t kWidth = 32;  // n_embd
constexpr double kLr = 3e-3;

// nanoGPT's shape, scaled down: 2 blocks of 2 heads, 32 wide, a context of 24 (not a
// multiple of a warp), AdamW with clipping, warmup and cosine decay.
// The Llama of the same size: 4 heads on 2 K/V heads, llama3 scaling whose three bands each
// hold frequencies, no biases.
v1::LlamaConfig Llama(v1::GptConfig::Attention attention) {
  v1::LlamaConfig llama;
  llama.set_vocab_size(shardwise::testing::CorpusGpt(24, kWidth).vocab_size());
  llama.set_hidden_size(kWidth);
  llama.set_intermediate_size(88);
  llama.set_num_hidden_layers(2);
  llama.set_num_attention_heads(4);
  llama.set_num_key_value_heads(2);
  llama.set_max_position_embeddings(32);
  llama.set_block_size(24);
  llama.set_rope_theta(100);
  v1::RopeScaling* scaling = llama.mutable_rope_scaling();
  scaling->set_rope_type("llama3");
  scaling->set_factor(4);
  scaling->set_low_freq_factor(1);
  scaling->set_high_freq_factor(2);
  scaling->set_original_max_position_embeddings(16);
  llama.set_attention(attention);
  return llama;
}

v1::JobSpec GptSpec(const GptConfig& c, v1::DeviceKind device, const std::string& dir,
                    const std::string& model_name) {
  v1::JobSpec spec;
  const auto attention = c.fused_attention ? v1::GptConfig::FUSED : v1::GptConfig::MATERIALIZED;
  if (c.llama) {
    *spec.mutable_model()->mutable_llama() = Llama(attention);
  } else {
    *spec.mutable_model()->mutable_gpt() = shardwise::testing::CorpusGpt(24, kWidth);
    spec.mutable_model()->mutable_gpt()->set_attention(attention);
    if (c.gelu_tanh) spec.mutable_model()->mutable_gpt()->set_activation(v1::GELU_TANH);
  }
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_fsdp()->set_limit_all_gathers(true);
  if (c.bf16) spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  spec.set_activation_checkpointing(c.checkpointing);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(kLr);
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  spec.mutable_optimizer()->mutable_lr_schedule()->set_warmup_steps(3);
  spec.mutable_optimizer()->mutable_lr_schedule()->set_decay(v1::LrSchedule::COSINE);
  v1::TokenData* tokens = spec.mutable_data()->mutable_tokens();
  tokens->set_train_path(shardwise::testing::WriteLearnableTokens(dir + "/train.bin", 6000, 1));
  tokens->set_seed(7);
  spec.set_global_batch_size(8);
  spec.set_steps(kSteps);
  spec.mutable_init()->set_seed(3);
  spec.set_world_size(c.world);
  spec.set_device(device);
  if (device == v1::CUDA) {
    spec.mutable_cuda()->set_collectives(c.collectives);
    if (c.storage16) spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
  }
  spec.mutable_output()->set_final_model_path(dir + "/" + model_name + ".safetensors");
  return spec;
}

struct Trained {
  std::vector<double> losses;
  TensorMap model;
};

absl::StatusOr<Trained> Train(const v1::JobSpec& spec) {
  shardwise::testing::ThreadedOptions options;
  if (spec.device() == v1::CUDA) options.make_device = CudaRankDevices(0);
  auto run = shardwise::testing::TrainInThreads(spec, options);
  if (!run.ok()) return run.status();
  auto model = ReadSafetensors(spec.output().final_model_path());
  if (!model.ok()) return model.status();
  return Trained{run->rank0_losses, std::move(*model)};
}

// The losses step by step within `loss_rtol`; the parameters elementwise (FP32) or tensor by
// tensor (`l2` > 0: BF16, whose elements move by rounding noise below its resolution,
// docs/semantics.md "Tolerances"); the key biases, noise only in both runs
// (WithoutGptKeyBiases), within what the run's steps of lr can reach.
void ExpectSameRun(const Trained& got, const Trained& want, double loss_rtol, double rtol,
                   double atol, double l2 = 0) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t i = 0; i < want.losses.size(); ++i) {
    EXPECT_NEAR(got.losses[i], want.losses[i], loss_rtol * std::fabs(want.losses[i]))
        << "step " << i + 1;
  }
  double got_keys = 0, want_keys = 0;
  const TensorMap got_model = shardwise::testing::WithoutGptKeyBiases(got.model, kWidth, &got_keys);
  const TensorMap want_model =
      shardwise::testing::WithoutGptKeyBiases(want.model, kWidth, &want_keys);
  if (l2 > 0) {
    EXPECT_TRUE(shardwise::testing::TensorsCloseL2(got_model, want_model, l2));
  } else {
    EXPECT_TRUE(shardwise::testing::ModelsClose(got_model, want_model, rtol, atol));
  }
  EXPECT_LE(std::max(got_keys, want_keys), kSteps * kLr);
}

class GptGpuParityTest : public ::testing::TestWithParam<GptConfig> {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

TEST_P(GptGpuParityTest, GpuRunMatchesTheCpuRun) {
  const GptConfig& c = GetParam();
  const std::string dir = TempDir("gpt-gpu-" + Name(c));
  auto cpu = Train(GptSpec(c, v1::CPU, dir, "cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto gpu = Train(GptSpec(c, v1::CUDA, dir, "gpu"));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_LT(cpu->losses.back(), cpu->losses.front()) << "the job did not train";
  if (c.bf16) {
    // BF16 keeps 8 bits: rounding decisions differ where FP32 sums differ in their last
    // bits, and the difference grows a little over the steps.
    ExpectSameRun(*gpu, *cpu, 2e-2, 0, 0, 5e-2);
  } else {
    ExpectSameRun(*gpu, *cpu, 1e-4, 1e-4, 1e-5);
  }
}

TEST(GptGpuCollectives, TwoRanksOverHostStagedGlooEqualOneRankOverNccl) {
  SKIP_WITHOUT_GPU();
  const std::string dir = TempDir("gpt-gpu-collectives");
  auto nccl = Train(GptSpec({1, v1::CudaOptions::NCCL}, v1::CUDA, dir, "nccl"));
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  auto staged = Train(GptSpec({2, v1::CudaOptions::HOST_STAGED_GLOO}, v1::CUDA, dir, "staged"));
  ASSERT_TRUE(staged.ok()) << staged.status();
  // The same global batch split over two ranks: the gradients are summed in another order.
  ExpectSameRun(*staged, *nccl, 1e-4, 1e-4, 1e-5);
}

constexpr auto kNccl = v1::CudaOptions::NCCL;
constexpr auto kStaged = v1::CudaOptions::HOST_STAGED_GLOO;

// The caching allocator on the GPU against the memory estimate (which counts the CUDA
// attention backward's score gradients and their 16-bit copies): what the CPU's is held
// to (testing::ExpectMemoryAsEstimated), in FP32, with checkpointing and in BF16; with
// cuDNN's attention (FUSED in BF16) or 16-bit storage, within it
// (ExpectMemoryWithinEstimate): the estimate budgets cuDNN 9.19's deterministic backward
// workspace (cudnn_attention_plan_test), and the cuDNN a GPU host loads may choose an
// engine that borrows less.
TEST(GptGpuMemory, TheAllocatorHoldsWhatTheEstimateSays) {
  SKIP_WITHOUT_GPU();
  const std::string dir = TempDir("gpt-gpu-memory");
  // FUSED in BF16: cuDNN's attention with its 16-bit copies and workspace; the last with
  // 16-bit storage, which the estimate (counting the CUDA-core kernel's FP32 copies that
  // cuDNN falls back to) bounds from above.
  for (const GptConfig& c :
       {GptConfig{1, kNccl}, GptConfig{1, kNccl, false, true}, GptConfig{1, kNccl, true},
        GptConfig{1, kNccl, false, false, true}, GptConfig{1, kNccl, true, false, true},
        GptConfig{1, kNccl, true, false, true, false, true}}) {
    v1::JobSpec spec = GptSpec(c, v1::CUDA, dir, "memory-" + Name(c));
    spec.mutable_model()->mutable_gpt()->set_n_embd(64);
    spec.mutable_model()->mutable_gpt()->set_block_size(64);
    spec.set_global_batch_size(16);
    spec.set_steps(3);
    spec.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
    ApplyJobSpecDefaults(&spec);
    auto estimate = EstimateRankMemory(spec);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    shardwise::testing::ThreadedOptions options;
    options.make_device = CudaRankDevices(0);
    auto run = shardwise::testing::TrainInThreads(spec, options);
    ASSERT_TRUE(run.ok()) << run.status();
    if (c.storage16 || (c.bf16 && c.fused_attention)) {
      shardwise::testing::ExpectMemoryWithinEstimate(run->memory[0], *estimate, spec, Name(c));
    } else {
      shardwise::testing::ExpectMemoryAsEstimated(run->memory[0], *estimate, spec, Name(c));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Jobs, GptGpuParityTest,
    ::testing::Values(GptConfig{1, kNccl}, GptConfig{1, kNccl, false, true},
                      GptConfig{1, kNccl, true}, GptConfig{2, kStaged},
                      GptConfig{1, kNccl, false, false, true},
                      GptConfig{1, kNccl, true, true, true},
                      GptConfig{1, kNccl, false, false, false, true},
                      GptConfig{2, kStaged, false, true, true, true},
                      GptConfig{1, kNccl, true, false, false, true},
                      // 16-bit storage: the GPT materialised and fused
                      // with checkpointing, the GQA Llama fused.
                      GptConfig{1, kNccl, true, false, false, false, true},
                      GptConfig{1, kNccl, true, true, true, false, true},
                      GptConfig{1, kNccl, true, false, true, true, true},
                      // GELU in the GEMM's epilogue: FP32, and BF16
                      // in 16-bit storage.
                      GptConfig{1, kNccl, false, false, false, false, false, true},
                      GptConfig{1, kNccl, true, false, false, false, true, true}),
    [](const ::testing::TestParamInfo<GptConfig>& info) { return Name(info.param); });

}  // namespace
}  // namespace shardwise::cuda
