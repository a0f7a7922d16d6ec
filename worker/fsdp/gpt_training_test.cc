// A GPT trained by the FSDP runtime: each rank a thread running the real trainer over real
// Gloo (testing::TrainInThreads), on token files written here. The properties that do not
// depend on PyTorch (tests/pytorch_parity_test compares with PyTorch itself): the loss and
// the validation loss fall; every prefetch setting, with random delays injected, gives the
// same model bit for bit; so does activation checkpointing; a resumed run (with gradient
// accumulation and a warmup + cosine schedule) equals an uninterrupted one bit for bit;
// FULL_SHARD's parameter memory is its shards plus at most two units; FUSED attention
// trains the model MATERIALIZED does, to rounding.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/fsdp_layout.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/memory_estimate.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/testing/async_cpu_rank_device.h"
#include "worker/testing/memory_expectations.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise::fsdp {
namespace {

using Strategy = v1::ShardingStrategy::Value;

std::string TempDir(const std::string& name) {
  std::string dir = testing::ScratchPath(name);
  std::filesystem::create_directories(dir);
  return dir;
}

v1::JobSpec GptSpec(const std::string& dir, Strategy strategy, int world, int steps) {
  v1::JobSpec spec;
  *spec.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  if (strategy == v1::ShardingStrategy::HYBRID_SHARD) spec.mutable_fsdp()->set_shard_group_size(2);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  v1::TokenData* tokens = spec.mutable_data()->mutable_tokens();
  tokens->set_train_path(testing::WriteLearnableTokens(dir + "/train.bin", 4000, 1));
  tokens->set_val_path(testing::WriteLearnableTokens(dir + "/val.bin", 800, 2));
  tokens->set_seed(7);
  spec.set_global_batch_size(8);
  spec.set_steps(steps);
  spec.set_world_size(world);
  spec.mutable_output()->set_final_model_path(dir + "/model.safetensors");
  return spec;
}

absl::StatusOr<TensorMap> TrainAndRead(const v1::JobSpec& spec,
                                       const testing::ThreadedOptions& options = {},
                                       testing::ThreadedTraining* run_out = nullptr) {
  auto run = testing::TrainInThreads(spec, options);
  if (!run.ok()) return run.status();
  if (run_out != nullptr) *run_out = *run;
  return ReadSafetensors(spec.output().final_model_path());
}

TEST(GptTraining, TheLossAndTheValidationLossFall) {
  const std::string dir = TempDir("gpt-falls");
  v1::JobSpec spec = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 40);
  spec.mutable_evaluation()->set_interval_steps(20);
  spec.mutable_evaluation()->set_batches(2);
  testing::ThreadedTraining run;
  auto model = TrainAndRead(spec, {}, &run);
  ASSERT_TRUE(model.ok()) << model.status();
  const v1::Progress& last = run.rank0_last_progress;
  EXPECT_LT(run.rank0_losses.back(), 0.7 * run.rank0_losses.front());
  EXPECT_EQ(last.val_loss_step(), 40);
  EXPECT_EQ(last.first_val_loss_step(), 0);  // evaluated before the first step too
  EXPECT_GT(last.first_val_loss(), 3.0);     // about log(32) before training
  EXPECT_LT(last.val_loss(), 0.7 * last.first_val_loss());
  EXPECT_GT(last.tokens_per_second(), 0);
  EXPECT_DOUBLE_EQ(last.learning_rate(), 3e-3);
  // The order common/prefetch_plan_test plans for: the root (unit 2) first and last.
  EXPECT_EQ(
      std::vector<int>(run.rank0_order.pre_forward().begin(), run.rank0_order.pre_forward().end()),
      (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(std::vector<int>(run.rank0_order.post_forward().begin(),
                             run.rank0_order.post_forward().end()),
            (std::vector<int>{0, 1, 2}));
  // nanoGPT's names, the tied head stored once.
  EXPECT_EQ(model->count("transformer.wte.weight"), 1u);
  EXPECT_EQ(model->count("lm_head.weight"), 0u);
  EXPECT_EQ(model->at("transformer.h.1.mlp.c_fc.weight").shape, (std::vector<int64_t>{64, 16}));
  auto metadata = ReadSafetensorsMetadata(spec.output().final_model_path());
  ASSERT_TRUE(metadata.ok());
  EXPECT_NE(metadata->at("shardwise.model").find("\"nLayer\":2"), std::string::npos)
      << metadata->at("shardwise.model");
}

struct PrefetchCase {
  Strategy strategy;
  v1::BackwardPrefetch::Value backward;
  bool forward;
};

class GptPrefetchTest : public ::testing::TestWithParam<PrefetchCase> {};

// The root runs the embeddings first and the head last; prefetch must never change what
// is computed, whatever the timing.
TEST_P(GptPrefetchTest, EverySettingWithInjectedDelaysGivesTheSameModel) {
  const PrefetchCase& c = GetParam();
  const std::string dir = TempDir("gpt-prefetch");
  v1::JobSpec spec = GptSpec(dir, c.strategy, 4, 6);
  spec.mutable_fsdp()->set_backward_prefetch(c.backward);
  spec.mutable_fsdp()->set_forward_prefetch(c.forward);
  v1::JobSpec plain = spec;
  plain.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  plain.mutable_fsdp()->set_forward_prefetch(false);
  plain.mutable_output()->set_final_model_path(dir + "/plain.safetensors");
  testing::ThreadedOptions shaken;
  shaken.faults = [](int rank) {
    TrainingFaults faults;
    faults.compute_delay = [rng = std::make_shared<std::mt19937>(rank + 1)] {
      std::this_thread::sleep_for(std::chrono::microseconds((*rng)() % 300));
    };
    faults.communication_delay = [rng = std::make_shared<std::mt19937>(rank + 100)] {
      std::this_thread::sleep_for(std::chrono::microseconds((*rng)() % 300));
    };
    return faults;
  };
  auto model = TrainAndRead(spec, shaken);
  auto plain_model = TrainAndRead(plain);
  ASSERT_TRUE(model.ok() && plain_model.ok()) << model.status() << plain_model.status();
  EXPECT_TRUE(testing::ModelsClose(*model, *plain_model, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(
    EverySetting, GptPrefetchTest,
    ::testing::Values(
        PrefetchCase{v1::ShardingStrategy::FULL_SHARD, v1::BackwardPrefetch::BACKWARD_PRE, false},
        PrefetchCase{v1::ShardingStrategy::FULL_SHARD, v1::BackwardPrefetch::BACKWARD_POST, true},
        PrefetchCase{v1::ShardingStrategy::SHARD_GRAD_OP, v1::BackwardPrefetch::BACKWARD_PRE, true},
        PrefetchCase{v1::ShardingStrategy::HYBRID_SHARD, v1::BackwardPrefetch::BACKWARD_POST,
                     false}),
    [](const auto& info) {
      return absl::StrCat(v1::ShardingStrategy::Value_Name(info.param.strategy), "_",
                          v1::BackwardPrefetch::Value_Name(info.param.backward),
                          info.param.forward ? "_forward" : "");
    });

TEST(GptTraining, ActivationCheckpointingGivesTheSameModelBitForBit) {
  const std::string dir = TempDir("gpt-checkpointing");
  v1::JobSpec plain = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 5);
  v1::JobSpec checkpointed = plain;
  checkpointed.set_activation_checkpointing(true);
  checkpointed.mutable_output()->set_final_model_path(dir + "/checkpointed.safetensors");
  testing::ThreadedTraining plain_run, checkpointed_run;
  auto a = TrainAndRead(plain, {}, &plain_run);
  auto b = TrainAndRead(checkpointed, {}, &checkpointed_run);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  EXPECT_TRUE(testing::ModelsClose(*a, *b, 0, 0));
  EXPECT_LT(checkpointed_run.memory[0].peak(MemoryCategory::kActivations),
            plain_run.memory[0].peak(MemoryCategory::kActivations));
}

// FUSED attention computes the function MATERIALIZED does in another order of rounding:
// the same model to FP32 rounding after 5 steps. The key biases, whose gradient is zero
// but for rounding noise that AdamW scales up to the learning rate, are left out
// (testing::WithoutGptKeyBiases) and held to 5 steps' worth of it.
TEST(GptTraining, FusedAttentionTrainsAsTheMaterialisedSoftmaxDoes) {
  const std::string dir = TempDir("gpt-fused");
  v1::JobSpec materialized = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 5);
  materialized.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::MATERIALIZED);
  v1::JobSpec fused = materialized;
  fused.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
  fused.mutable_output()->set_final_model_path(dir + "/fused.safetensors");
  testing::ThreadedTraining materialized_run, fused_run;
  auto a = TrainAndRead(materialized, {}, &materialized_run);
  auto b = TrainAndRead(fused, {}, &fused_run);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  const int64_t width = materialized.model().gpt().n_embd();
  double largest_a = 0, largest_b = 0;
  const TensorMap got = testing::WithoutGptKeyBiases(*b, width, &largest_b);
  const TensorMap want = testing::WithoutGptKeyBiases(*a, width, &largest_a);
  EXPECT_TRUE(testing::ModelsClose(got, want, 1e-4, 1e-5));
  EXPECT_LE(std::max(largest_a, largest_b), 5 * 3e-3);
  ASSERT_EQ(fused_run.rank0_losses.size(), materialized_run.rank0_losses.size());
  for (size_t i = 0; i < fused_run.rank0_losses.size(); ++i) {
    EXPECT_NEAR(fused_run.rank0_losses[i], materialized_run.rank0_losses[i],
                1e-5 * materialized_run.rank0_losses[i])
        << "step " << i + 1;
  }
  // No seq x seq buffer: the fused run's activations peak lower.
  EXPECT_LT(fused_run.memory[0].peak(MemoryCategory::kActivations),
            materialized_run.memory[0].peak(MemoryCategory::kActivations));
}

// Attempt 1 trains 6 of 12 steps with a checkpoint at step 6; attempt 2 resumes from it.
// Gradient accumulation, clipping, AdamW with nanoGPT's decay groups and a warmup + cosine
// schedule all carry over: the result equals the uninterrupted run bit for bit.
TEST(GptTraining, AResumedRunWithAccumulationEqualsAnUninterruptedOne) {
  const std::string dir = TempDir("gpt-resume");
  v1::JobSpec straight = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 12);
  straight.set_gradient_accumulation_steps(2);
  straight.mutable_optimizer()->set_weight_decay_params(v1::WeightDecayParams::MATRICES);
  v1::LrSchedule* schedule = straight.mutable_optimizer()->mutable_lr_schedule();
  schedule->set_decay(v1::LrSchedule::COSINE);
  schedule->set_warmup_steps(3);
  schedule->set_decay_steps(12);
  schedule->set_min_lr(3e-4);
  straight.mutable_output()->set_final_model_path(dir + "/straight.safetensors");
  testing::ThreadedOptions options;
  options.job_id = "job-straight";
  auto a = TrainAndRead(straight, options);
  ASSERT_TRUE(a.ok()) << a.status();

  v1::JobSpec interrupted = straight;
  interrupted.set_steps(6);
  interrupted.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  interrupted.mutable_output()->set_checkpoint_interval_steps(6);
  interrupted.mutable_output()->set_final_model_path(dir + "/unused.safetensors");
  options.job_id = "job-resumed";
  ASSERT_TRUE(TrainAndRead(interrupted, options).ok());
  v1::JobSpec resumed = interrupted;
  resumed.set_steps(12);
  resumed.mutable_output()->set_final_model_path(dir + "/resumed.safetensors");
  options.attempt = 2;
  testing::ThreadedTraining run;
  auto b = TrainAndRead(resumed, options, &run);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(run.rank0.resumed_from_step, 6);
  EXPECT_TRUE(testing::ModelsClose(*a, *b, 0, 0));
}

// An attempt that resumes from the last step's checkpoint (its predecessor failed after it,
// before or while it wrote the model) has no step to train: it still measures the
// validation loss after the last step, and counts the job's steps, not none.
TEST(GptTraining, AnAttemptResumedAtTheLastStepEvaluatesAndCountsTheSteps) {
  const std::string dir = TempDir("gpt-resume-end");
  v1::JobSpec spec = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 4);
  spec.mutable_output()->set_checkpoint_dir(dir + "/ckpt");
  spec.mutable_output()->set_checkpoint_interval_steps(4);
  testing::ThreadedOptions options;
  options.job_id = "job-end";
  ASSERT_TRUE(TrainAndRead(spec, options).ok());
  options.attempt = 2;
  testing::ThreadedTraining run;
  ASSERT_TRUE(TrainAndRead(spec, options, &run).ok());
  EXPECT_EQ(run.rank0.resumed_from_step, 4);
  EXPECT_EQ(run.rank0.steps, 4);
  EXPECT_EQ(run.rank0.last_val_loss_step, 4);
  EXPECT_GT(run.rank0.last_val_loss, 0);
  EXPECT_TRUE(absl::StartsWith(run.rank0.Summary(), "trained 4 steps, all before this attempt"))
      << run.rank0.Summary();
}

// FULL_SHARD without prefetch holds its shards plus the largest unit; with it, at most
// two units (docs/semantics.md, limit_all_gathers), against NO_SHARD's whole model.
TEST(GptTraining, FullShardHoldsItsShardsPlusAtMostTwoUnits) {
  const std::string dir = TempDir("gpt-memory");
  v1::JobSpec one_at_a_time = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 4, 2);
  one_at_a_time.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  v1::JobSpec prefetching = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 4, 2);
  v1::JobSpec whole = GptSpec(dir, v1::ShardingStrategy::NO_SHARD, 4, 2);
  testing::ThreadedTraining full_run, prefetch_run, whole_run;
  ASSERT_TRUE(TrainAndRead(one_at_a_time, {}, &full_run).ok());
  ASSERT_TRUE(TrainAndRead(prefetching, {}, &prefetch_run).ok());
  ASSERT_TRUE(TrainAndRead(whole, {}, &whole_run).ok());
  auto layout = BuildFlatLayout(one_at_a_time.model(), one_at_a_time.wrap());
  ASSERT_TRUE(layout.ok());
  int64_t shards = 0, root = 0, block = 0, total = 0;
  for (const UnitLayout& unit : layout->units) {
    const int64_t padded = PaddedNumel(unit.numel, 4) * 4;  // bytes
    shards += padded / 4;
    total += unit.numel * 4;
    (unit.is_root ? root : block) = padded;
  }
  for (int r = 0; r < 4; ++r) {
    // The root stays gathered through the step; one block beside it at a time.
    EXPECT_EQ(full_run.memory[r].peak(MemoryCategory::kParameters), shards + root + block) << r;
    EXPECT_LE(prefetch_run.memory[r].peak(MemoryCategory::kParameters), shards + root + 2 * block)
        << r;
    EXPECT_EQ(whole_run.memory[r].peak(MemoryCategory::kParameters), total) << r;
    EXPECT_EQ(full_run.memory[r].live(MemoryCategory::kParameters), 0) << r;
  }
}

// The estimate the coordinator and workers check before a job runs
// (contracts/memory_estimate.h) against the allocator's peak counters of real ranks:
// parameters and optimizer state exact, gradients and activations close.
TEST(GptTraining, TheMemoryEstimateMatchesWhatTheRanksAllocate) {
  const std::string dir = TempDir("gpt-estimate");
  struct Case {
    const char* name;
    v1::JobSpec spec;
  };
  std::vector<Case> cases;
  v1::JobSpec full = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 2);
  full.mutable_model()->mutable_gpt()->set_n_embd(64);
  full.mutable_model()->mutable_gpt()->set_block_size(64);
  full.set_global_batch_size(16);
  cases.push_back({"FULL_SHARD+prefetch", full});
  v1::JobSpec one_at_a_time = full;
  one_at_a_time.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  cases.push_back({"FULL_SHARD", one_at_a_time});
  v1::JobSpec whole = full;
  whole.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  cases.push_back({"NO_SHARD", whole});
  v1::JobSpec checkpointed = one_at_a_time;
  checkpointed.set_activation_checkpointing(true);
  cases.push_back({"FULL_SHARD+checkpointing", checkpointed});
  v1::JobSpec bf16 = one_at_a_time;
  bf16.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  cases.push_back({"FULL_SHARD+BF16", bf16});
  v1::JobSpec fused = one_at_a_time;
  fused.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
  cases.push_back({"FULL_SHARD+FUSED", fused});
  v1::JobSpec accumulated = one_at_a_time;  // every unit's unsharded gradients held
  accumulated.set_gradient_accumulation_steps(2);
  cases.push_back({"FULL_SHARD+accumulation", accumulated});
  for (Case& c : cases) {
    ApplyJobSpecDefaults(&c.spec);
    auto estimate = EstimateRankMemory(c.spec);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    testing::ThreadedTraining run;
    ASSERT_TRUE(TrainAndRead(c.spec, {}, &run).ok()) << c.name;
    testing::ExpectMemoryAsEstimated(run.memory[0], *estimate, c.spec, c.name);
    // On the CPU the estimate is an upper bound, category by category.
    EXPECT_LE(run.memory[0].peak(MemoryCategory::kActivations), estimate->activations) << c.name;
  }
}

// A device storing in the job's 16-bit param_dtype (cuda.storage STORAGE_PARAM_DTYPE; here
// the stream checker in its 16-bit mode, which reports itself as CUDA and allocates as
// the CUDA device does: testing/async_cpu_device.h) against the estimate in 2 bytes an
// element: the unsharded parameters, the FP32 shards and optimizer state exact, the
// gradients within it. Its activations are not the GPU's (the CPU kernels widen their
// 16-bit operands into FP32 scratch); gpt_gpu_parity_test holds the GPU's to the bound.
TEST(GptTraining, SixteenBitStorageAllocatesTheParametersAsEstimated) {
  const std::string dir = TempDir("gpt-estimate-storage16");
  v1::JobSpec spec = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 2);
  spec.mutable_model()->mutable_gpt()->set_n_embd(64);
  spec.mutable_model()->mutable_gpt()->set_block_size(64);
  spec.set_global_batch_size(16);
  spec.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  spec.set_device(v1::CUDA);
  spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
  for (const auto strategy : {v1::ShardingStrategy::FULL_SHARD, v1::ShardingStrategy::NO_SHARD}) {
    const std::string name = v1::ShardingStrategy::Value_Name(strategy);
    spec.mutable_fsdp()->set_sharding_strategy(strategy);
    v1::JobSpec effective = spec;
    ApplyJobSpecDefaults(&effective);
    ASSERT_EQ(StoredElementBytes(effective), 2);
    auto estimate = EstimateRankMemory(effective);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    testing::ThreadedOptions options;
    options.make_device = testing::AsyncCpuRankDevices({}, /*low_precision_storage=*/true);
    testing::ThreadedTraining run;
    ASSERT_TRUE(TrainAndRead(effective, options, &run).ok()) << name;
    const MemoryStats& m = run.memory[0];
    std::printf("%s: parameters %lld / %lld, activations %lld / %lld (measured / estimated)\n",
                name.c_str(), static_cast<long long>(m.peak(MemoryCategory::kParameters)),
                static_cast<long long>(estimate->parameters),
                static_cast<long long>(m.peak(MemoryCategory::kActivations)),
                static_cast<long long>(estimate->activations));
    testing::ExpectParametersAsEstimated(m, *estimate, effective, name);
    EXPECT_EQ(m.peak(MemoryCategory::kOptimizerState), estimate->optimizer_state) << name;
    EXPECT_LE(m.peak(MemoryCategory::kGradients), estimate->gradients) << name;
  }
}

// The same for the Llama: a block keeps its own tensors (q/k/v, packed with K/V repeated
// under MATERIALIZED, apart under FUSED; the SwiGLU's four; 1/rms), so its estimate is its
// own.
TEST(LlamaTraining, TheMemoryEstimateMatchesWhatTheRanksAllocate) {
  const std::string dir = TempDir("llama-estimate");
  v1::JobSpec base = GptSpec(dir, v1::ShardingStrategy::FULL_SHARD, 2, 2);
  base.mutable_model()->Clear();
  v1::LlamaConfig* llama = base.mutable_model()->mutable_llama();
  llama->set_vocab_size(32);  // the token files' (testing::CorpusGpt)
  llama->set_hidden_size(64);
  llama->set_intermediate_size(160);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_max_position_embeddings(64);
  base.set_global_batch_size(16);
  base.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  std::vector<std::pair<std::string, v1::JobSpec>> cases = {{"FULL_SHARD", base}};
  v1::JobSpec fused = base;
  fused.mutable_model()->mutable_llama()->set_attention(v1::GptConfig::FUSED);
  cases.emplace_back("FULL_SHARD+FUSED", fused);
  v1::JobSpec checkpointed = base;
  checkpointed.set_activation_checkpointing(true);
  cases.emplace_back("FULL_SHARD+checkpointing", checkpointed);
  v1::JobSpec tied = base;
  tied.mutable_model()->mutable_llama()->set_tie_word_embeddings(true);
  tied.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  cases.emplace_back("NO_SHARD+tied", tied);
  for (auto& [name, spec] : cases) {
    ApplyJobSpecDefaults(&spec);
    auto estimate = EstimateRankMemory(spec);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    testing::ThreadedTraining run;
    const auto trained = TrainAndRead(spec, {}, &run);
    ASSERT_TRUE(trained.ok()) << name << ": " << trained.status();
    testing::ExpectMemoryAsEstimated(run.memory[0], *estimate, spec, name);
    EXPECT_LE(run.memory[0].peak(MemoryCategory::kActivations), estimate->activations) << name;
  }
}

// A reduction that falls behind the backward (each one 20 ms late here) makes the next
// unit's wait: the gradients held stay within the estimate (two units' unsharded ones
// besides the root's), where without the wait every unit's would pile up.
TEST(GptTraining, SlowReductionsHoldNoMoreGradientsThanEstimated) {
  const std::string dir = TempDir("gpt-slow-reductions");
  for (auto strategy : {v1::ShardingStrategy::NO_SHARD, v1::ShardingStrategy::FULL_SHARD}) {
    v1::JobSpec spec = GptSpec(dir, strategy, 2, 2);
    spec.mutable_model()->mutable_gpt()->set_n_layer(4);
    ApplyJobSpecDefaults(&spec);
    auto estimate = EstimateRankMemory(spec);
    ASSERT_TRUE(estimate.ok()) << estimate.status();
    testing::ThreadedOptions slow;
    slow.faults = [](int) {
      TrainingFaults faults;
      faults.communication_delay = [] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      };
      return faults;
    };
    testing::ThreadedTraining run;
    ASSERT_TRUE(TrainAndRead(spec, slow, &run).ok());
    const std::string name = v1::ShardingStrategy::Value_Name(strategy);
    EXPECT_LE(run.memory[0].peak(MemoryCategory::kGradients), estimate->gradients) << name;
    EXPECT_LE(run.memory[1].peak(MemoryCategory::kGradients), estimate->gradients) << name;
  }
}

}  // namespace
}  // namespace shardwise::fsdp
