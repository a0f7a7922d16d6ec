#include "contracts/memory_estimate.h"

#include <cstdint>
#include <limits>

#include "contracts/cudnn_attention_workspace.h"
#include "contracts/job_spec_defaults.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::JobSpec Mlp(int world, v1::ShardingStrategy::Value strategy) {
  v1::JobSpec spec;
  for (int w : {4, 8, 3}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(100);
  spec.set_global_batch_size(16);
  spec.set_steps(1);
  spec.set_world_size(world);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

v1::JobSpec Gpt(v1::ShardingStrategy::Value strategy) {
  v1::JobSpec spec;
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(256);
  gpt->set_block_size(128);
  gpt->set_n_layer(4);
  gpt->set_n_head(4);
  gpt->set_n_embd(256);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path("/data/train.bin");
  spec.set_global_batch_size(16);
  spec.set_steps(1);
  spec.set_world_size(2);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  ApplyJobSpecDefaults(&spec);
  return spec;
}

// The MLP 4-8-3 has 67 parameters; the default wrap policy makes each Linear a unit (40
// and 27 parameters) and leaves the root empty. On one rank that is NO_SHARD.
TEST(EstimateRankMemory, CountsAnUnshardedMlpExactly) {
  auto e = EstimateRankMemory(Mlp(1, v1::ShardingStrategy::FULL_SHARD));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->parameters, 4 * 67);
  // The accumulated gradients, and the unsharded ones of two units of the larger size.
  EXPECT_EQ(e->gradients, 4 * (67 + 2 * 40));
  EXPECT_EQ(e->optimizer_state, 0);  // SGD without momentum
  // Input, loss gradient, each Linear's output before and after its activation, the
  // INT64 labels; and the step's loss waiting to be read (FP64).
  EXPECT_EQ(e->activations, 4 * 16 * (4 + 3 + 2 * (8 + 3) + 2) + 8);
  EXPECT_EQ(e->data, 4 * (4 + 3) * 100);
  EXPECT_EQ(e->total(), e->parameters + e->gradients + e->activations + e->data);
}

TEST(EstimateRankMemory, ShardingDividesWhatIsSharded) {
  const v1::JobSpec none = Gpt(v1::ShardingStrategy::NO_SHARD);
  v1::JobSpec full = Gpt(v1::ShardingStrategy::FULL_SHARD);
  auto unsharded = EstimateRankMemory(none);
  auto sharded = EstimateRankMemory(full);
  ASSERT_TRUE(unsharded.ok() && sharded.ok());
  // AdamW's two moments of a shard: half the unsharded ones at world 2 (padding aside).
  EXPECT_NEAR(sharded->optimizer_state, unsharded->optimizer_state / 2.0, 64);
  EXPECT_EQ(sharded->activations, unsharded->activations);
  // A shard, the root and one block gathered hold less than the whole model; prefetching
  // gathers one more block, which for this small model (4 blocks, world 2) is more than
  // the whole model, as the allocator measures too (bench/RESULTS.md).
  full.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  auto no_prefetch = EstimateRankMemory(full);
  ASSERT_TRUE(no_prefetch.ok());
  EXPECT_LT(no_prefetch->parameters, unsharded->parameters);
  EXPECT_LT(no_prefetch->parameters, sharded->parameters);
  EXPECT_GT(sharded->parameters, unsharded->parameters);
}

TEST(EstimateRankMemory, CheckpointingKeepsOnlyTheBlocksInputs) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  auto plain = EstimateRankMemory(spec);
  spec.set_activation_checkpointing(true);
  auto checkpointed = EstimateRankMemory(spec);
  ASSERT_TRUE(plain.ok() && checkpointed.ok());
  EXPECT_LT(checkpointed->activations * 2, plain->activations);
}

// A CUDA attention backward holds one micro-batch's score gradients (4 heads x 128 x 128
// per sequence, 8 sequences per rank) at once, plus 16-bit copies of them and of the
// probabilities with BF16 operands.
TEST(EstimateRankMemory, CudaAttentionAddsItsScoreGradients) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  auto cpu = EstimateRankMemory(spec);
  spec.set_device(v1::CUDA);
  auto cuda = EstimateRankMemory(spec);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  auto cuda_bf16 = EstimateRankMemory(spec);
  ASSERT_TRUE(cpu.ok() && cuda.ok() && cuda_bf16.ok());
  const int64_t scores = int64_t{4} * 128 * 128 * 8;
  // The CPU's backward holds one head's score gradients at a time.
  const int64_t cpu_head = int64_t{4} * 128 * 128;
  EXPECT_EQ(cuda->activations - cpu->activations, 4 * scores - cpu_head);
  EXPECT_EQ(cuda_bf16->activations - cpu->activations, 8 * scores - cpu_head);
}

// FUSED attention keeps each row's log-sum-exp (4 heads x 128 per sequence) where
// MATERIALIZED keeps the probabilities (x 128 more), in each of the 4 blocks, and its
// backward holds one such row statistic and the attention output (256 per row) besides,
// on any device. On the CPU the materialised backward's scratch is one head's score
// gradients, the fused one's its blocks (3 x 64 x 512 floats, a tile's 2 x 64 statistics
// and its 64 x 64 output) and, for each pass, one head's copies (4 x 128 x 64 floats and
// two 64 x 160 transposes).
TEST(EstimateRankMemory, FusedAttentionKeepsRowStatisticsInsteadOfProbabilities) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  for (const v1::DeviceKind device : {v1::CPU, v1::CUDA}) {
    spec.set_device(device);
    spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::MATERIALIZED);
    auto materialized = EstimateRankMemory(spec);
    spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
    auto fused = EstimateRankMemory(spec);
    ASSERT_TRUE(materialized.ok() && fused.ok());
    const int64_t row_stats = int64_t{4} * 128 * 8, scores = row_stats * 128,
                  out = int64_t{256} * 128 * 8;
    const bool cuda = device == v1::CUDA;
    const int64_t materialized_backward = cuda ? 4 * scores : int64_t{4} * 128 * 128;
    const int64_t fused_scratch = 3 * 64 * 512 + 2 * 64 + 64 * 64 + 7 * 128 * 64 + 3 * 64 * 160;
    const int64_t fused_backward = 4 * (row_stats + out) + (cuda ? 0 : 4 * fused_scratch);
    EXPECT_EQ(materialized->activations - fused->activations,
              int64_t{4} * 4 * (scores - row_stats) + materialized_backward - fused_backward)
        << v1::DeviceKind_Name(device);
  }
}

// A Llama with FUSED attention keeps q, k and v apart: with fewer K/V heads, each block
// keeps 2 (A - K) floats less per row than with one K/V head per query head (A = heads x
// head_dim, K = kv_heads x head_dim); under MATERIALIZED, K and V are repeated to the query
// heads, so the K/V heads change nothing. On CUDA in BF16 the backward's scratch is the
// larger of cuDNN's and the CUDA-core kernel's, and here cuDNN's is the same for both:
// its 16-bit copies of q/k/v, out, dout and the q/k/v gradient (2 (A + 2 K) + 2 A
// elements a row, 2 bytes each) shrink by 2 x 4 (A - K) = 256 bytes a row with K = A / 2,
// which is what its backward's workspace then adds for each query head's K/V gradients
// before their group's sum (4 A = 256 bytes a row); its 16-bit scores (8 x 4 x 64 x 128 x
// 2 bytes, the context rounded up to cuDNN's tiles) stay. The CUDA-core kernel's FP32 packing of
// q/k/v and their gradient (3 A each: 24 A) is smaller.
// A small Llama (4 heads of 16, context 32, 3 layers) in BF16 on `device`, as Gpt()'s job.
v1::JobSpec SmallLlama(v1::GptConfig::Attention attention, v1::DeviceKind device) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_model()->clear_gpt();
  v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
  llama->set_vocab_size(256);
  llama->set_hidden_size(64);
  llama->set_intermediate_size(96);
  llama->set_num_hidden_layers(3);
  llama->set_num_attention_heads(4);
  llama->set_head_dim(16);
  llama->set_block_size(32);
  llama->set_attention(attention);
  spec.set_device(device);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  return spec;
}

TEST(EstimateRankMemory, LlamaFusedAttentionKeepsGroupedKvHeadsApart) {
  for (const auto& [attention, device] :
       {std::pair{v1::GptConfig::FUSED, v1::CPU}, std::pair{v1::GptConfig::FUSED, v1::CUDA},
        std::pair{v1::GptConfig::MATERIALIZED, v1::CPU}}) {
    v1::JobSpec spec = SmallLlama(attention, device);
    v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
    llama->set_num_key_value_heads(4);
    auto multi_head = EstimateRankMemory(spec);
    llama->set_num_key_value_heads(2);
    auto grouped = EstimateRankMemory(spec);
    ASSERT_TRUE(multi_head.ok()) << multi_head.status();
    ASSERT_TRUE(grouped.ok()) << grouped.status();
    const int64_t rows = int64_t{32} * 8, saved_less = int64_t{2} * (64 - 32);
    const int64_t want = attention == v1::GptConfig::FUSED ? int64_t{3} * 4 * saved_less * rows : 0;
    EXPECT_EQ(multi_head->activations - grouped->activations, want)
        << v1::GptConfig::Attention_Name(attention) << " on " << v1::DeviceKind_Name(device);
  }
}

// On CUDA in BF16, cuDNN's fused attention adds its 16-bit copies (q/k/v, out, dout and
// the q/k/v gradient: 8 x 256 per row, 2 bytes each) and its deterministic backward's
// workspace (2 bytes per score of each head, 8 x 4 x 128 x 128, and its alignment) to the
// fused backward; a job that asks for the CUDA-core kernel, or an FP32 job, needs neither.
TEST(EstimateRankMemory, CudnnAttentionAddsItsCopiesAndWorkspace) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  spec.set_device(v1::CUDA);
  spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  auto cudnn = EstimateRankMemory(spec);
  spec.mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDA_CORES);
  auto cuda_cores = EstimateRankMemory(spec);
  ASSERT_TRUE(cudnn.ok() && cuda_cores.ok());
  const int64_t rows = int64_t{128} * 8, width = 256;
  const int64_t workspace = int64_t{2} * 8 * 4 * 128 * 128 + kCudnnWorkspaceAlignmentBytes;
  EXPECT_EQ(workspace,
            CudnnAttentionBackwardWorkspaceBytes(8, 4, 4, 128, 64) + kCudnnWorkspaceAlignmentBytes);
  EXPECT_EQ(cudnn->activations - cuda_cores->activations,
            int64_t{2} * 8 * width * rows + workspace);
  // The atomic backward's scratch is linear in the context: its FP32 dQ accumulator and,
  // on Ampere, cuDNN's own sums (4 bytes x 8 x 4 x 128 x 64 each), with their alignments.
  spec.mutable_cuda()->clear_fused_attention_kernel();
  spec.mutable_cuda()->set_attention_backward(v1::CudaOptions::ATOMIC);
  auto atomic = EstimateRankMemory(spec);
  ASSERT_TRUE(atomic.ok());
  const int64_t atomic_scratch =
      int64_t{2} * 4 * 8 * 4 * 128 * 64 + 2 * kCudnnWorkspaceAlignmentBytes;
  EXPECT_EQ(atomic_scratch, CudnnAttentionAtomicBackwardBytes(8, 4, 4, 128, 64) +
                                2 * kCudnnWorkspaceAlignmentBytes);
  EXPECT_EQ(atomic->activations - cuda_cores->activations,
            int64_t{2} * 8 * width * rows + atomic_scratch);
  spec.mutable_cuda()->clear_attention_backward();
  spec.mutable_cuda()->clear_fused_attention_kernel();
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::FP32);
  auto fp32 = EstimateRankMemory(spec);
  spec.mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDA_CORES);
  auto fp32_cuda_cores = EstimateRankMemory(spec);
  ASSERT_TRUE(fp32.ok() && fp32_cuda_cores.ok());
  EXPECT_EQ(fp32->activations, fp32_cuda_cores->activations);
}

// With mixed precision in FP32 storage (the CPU's, CUDA's default) the gathered units stay
// FP32 (widened from the 16-bit values the all-gather moved), and the 16-bit copies live
// besides while a unit gathers: more
// parameter memory than FP32, not less (gpt_training_test checks the exact figure against
// the allocator). NO_SHARD keeps a rounded FP32 copy of the whole model.
TEST(EstimateRankMemory, MixedPrecisionGathersIntoFp32) {
  for (auto strategy : {v1::ShardingStrategy::SHARD_GRAD_OP, v1::ShardingStrategy::FULL_SHARD}) {
    v1::JobSpec spec = Gpt(strategy);
    auto fp32 = EstimateRankMemory(spec);
    spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
    auto bf16 = EstimateRankMemory(spec);
    ASSERT_TRUE(fp32.ok() && bf16.ok());
    EXPECT_GT(bf16->parameters, fp32->parameters) << strategy;
    EXPECT_EQ(bf16->gradients, fp32->gradients) << strategy;
  }
  v1::JobSpec whole = Gpt(v1::ShardingStrategy::NO_SHARD);
  auto fp32 = EstimateRankMemory(whole);
  whole.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  auto bf16 = EstimateRankMemory(whole);
  ASSERT_TRUE(fp32.ok() && bf16.ok());
  EXPECT_EQ(bf16->parameters, 2 * fp32->parameters);
}

// A CUDA job storing in its 16-bit param_dtype (cuda.storage STORAGE_PARAM_DTYPE) keeps
// its activations, their gradients and its unsharded parameters in 2 bytes; the FP32
// shards, gradients, optimizer state, statistics and INT64 labels are unchanged. The MLP
// 4-8-3 on one rank (NO_SHARD): the FP32 parameters and their BF16 copy (67 each); input,
// loss gradient and each Linear's output before and after its activation in 2 bytes.
TEST(EstimateRankMemory, SixteenBitStorageHalvesWhatIsStored) {
  v1::JobSpec spec = Mlp(1, v1::ShardingStrategy::FULL_SHARD);
  spec.set_device(v1::CUDA);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  EXPECT_EQ(StoredElementBytes(spec), 4);
  auto fp32_storage = EstimateRankMemory(spec);
  spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
  EXPECT_EQ(StoredElementBytes(spec), 2);
  auto storage16 = EstimateRankMemory(spec);
  ASSERT_TRUE(fp32_storage.ok() && storage16.ok());
  EXPECT_EQ(fp32_storage->parameters, (4 + 4) * 67);
  EXPECT_EQ(storage16->parameters, (4 + 2) * 67);
  EXPECT_EQ(fp32_storage->activations, 16 * (4 * (4 + 3 + 2 * (8 + 3)) + 8) + 8);
  EXPECT_EQ(storage16->activations, 16 * (2 * (4 + 3 + 2 * (8 + 3)) + 8) + 8);
  EXPECT_EQ(storage16->gradients, fp32_storage->gradients);
  // An FP32 job, or one on the CPU, stores FP32 whatever cuda.storage says.
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::FP32);
  EXPECT_EQ(StoredElementBytes(spec), 4);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::FP16);
  spec.set_device(v1::CPU);
  EXPECT_EQ(StoredElementBytes(spec), 4);
}

// The GPT of Gpt() sharded over 2 ranks without prefetch, on CUDA in BF16: the root (wte
// 256 x 256, wpe 128 x 256, ln_f 2 x 256: 98,816) and one block (12 x 256^2 + 13 x 256:
// 789,760) gathered. FP32 storage holds them in 4 bytes plus, while the block gathers,
// its 16-bit gathered copy and shard (2 x 789,760 + 789,760); 16-bit storage gathers into
// 2 bytes, with only the shard's copy beside. Per row (8 sequences of 128 on a rank), with
// the CUDA-core FUSED kernel: each of the 4 blocks keeps 16 x 256 values in 2 bytes
// instead of 4; the backward holds dout in 2 bytes (256), and at a head size the kernel
// reads in 16 bits itself (64) nothing more, at another (16) widens q/k/v, out, dout and
// their gradients into FP32 for it (4 x (2 x 768 + 2 x 256)); the largest working set, a
// block backward's 5 x 256 values, is stored in 2 bytes.
TEST(EstimateRankMemory, SixteenBitStorageGathersAndKeepsHalfTheBytes) {
  // Head sizes 64 (the CUDA-core attention kernel reads 16-bit storage itself) and 16 (it
  // goes through FP32 copies: contracts/cuda_attention_rows.h).
  for (const int32_t heads : {4, 16}) {
    SCOPED_TRACE(::testing::Message() << heads << " heads");
    v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
    spec.set_device(v1::CUDA);
    spec.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
    spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
    spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
    spec.mutable_model()->mutable_gpt()->set_n_head(heads);
    spec.mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDA_CORES);
    auto fp32_storage = EstimateRankMemory(spec);
    spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
    auto storage16 = EstimateRankMemory(spec);
    ASSERT_TRUE(fp32_storage.ok() && storage16.ok());
    const int64_t root = 98816, block = 789760;
    EXPECT_EQ(fp32_storage->parameters - storage16->parameters, 2 * (root + block) + 2 * block);
    EXPECT_EQ(storage16->gradients, fp32_storage->gradients);
    EXPECT_EQ(storage16->optimizer_state, fp32_storage->optimizer_state);
    const int64_t rows = int64_t{128} * 8;
    const int64_t widened = heads == 16 ? int64_t{4} * (2 * 768 + 2 * 256) : 0,
                  block_backward = int64_t{4 - 2} * 5 * 256;
    EXPECT_EQ(fp32_storage->activations - storage16->activations,
              (4 * (4 - 2) * 16 * 256 + (4 - 2) * 256 - widened + block_backward) * rows);
    // cuDNN binds 16-bit storage in place, with its workspace (2 bytes per score of each
    // head); the bound keeps the CUDA-core kernel's copies where they are larger, which the
    // job falls back to where cuDNN cannot run the shape.
    spec.mutable_cuda()->clear_fused_attention_kernel();
    auto cudnn = EstimateRankMemory(spec);
    ASSERT_TRUE(cudnn.ok());
    const int64_t workspace = int64_t{2} * 8 * heads * 128 * 128 + kCudnnWorkspaceAlignmentBytes;
    EXPECT_EQ(cudnn->activations - storage16->activations,
              std::max<int64_t>(0, workspace - widened * rows));
  }
}

// A Llama's CUDA-core FUSED attention in 16-bit storage at a head size it reads in 16 bits
// (32): q, k and v packed in 2 bytes and their gradients in FP32 working space, (2 + 4) x
// 3 A bytes a row, where FP32 storage packs both in FP32 ((4 + 4) x 3 A) and holds its
// rows in 4 bytes; with head size 16 the 16-bit job widens everything for the kernel.
TEST(EstimateRankMemory, LlamaCudaCoreAttentionPacksInTheStorageType) {
  v1::JobSpec spec = SmallLlama(v1::GptConfig::FUSED, v1::CUDA);
  v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
  llama->set_num_attention_heads(2);
  llama->set_num_key_value_heads(1);
  llama->set_head_dim(32);
  spec.mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDA_CORES);
  spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
  const absl::StatusOr<MemoryEstimate> head32 = EstimateRankMemory(spec);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_head_dim(16);  // the same widths: A = 64, K = 32
  const absl::StatusOr<MemoryEstimate> head16 = EstimateRankMemory(spec);
  ASSERT_TRUE(head32.ok() && head16.ok()) << head32.status() << head16.status();
  const int64_t rows = int64_t{32} * 8, a = 64, qkv_width = 64 + 2 * 32;
  const int64_t packing16 = a * 3 * (2 + 4), packing_widened = a * 3 * (4 + 4);
  const int64_t widened = 4 * (2 * qkv_width + 2 * a);
  // Besides, the head size moves the rotary tables (block_size x head_dim, FP32), and the
  // heads' count each block's kept log-sum-exps and the backward's dout . out (one FP32
  // value per head and row each).
  const int64_t tables = int64_t{4} * 32 * (32 - 16), lse = rows * 4 * (4 - 2) * 3,
                dots = rows * 4 * (4 - 2);
  EXPECT_EQ(head16->activations - head32->activations,
            (widened + packing_widened - packing16) * rows - tables + lse + dots);
}

// The largest sizes the coordinator's limits allow saturate rather than overflow.
TEST(EstimateRankMemory, SaturatesInsteadOfOverflowing) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_model()->mutable_gpt()->set_block_size(1 << 20);
  spec.mutable_model()->mutable_gpt()->set_n_head(1 << 8);
  spec.set_global_batch_size(int64_t{1} << 24);
  spec.set_world_size(1);
  auto e = EstimateRankMemory(spec);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->activations, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(e->total(), std::numeric_limits<int64_t>::max());
  // cuDNN's workspace too, whose exact size (int64) such a shape would overflow.
  spec.set_device(v1::CUDA);
  spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  for (const auto backward :
       {v1::CudaOptions::ATTENTION_BACKWARD_UNSPECIFIED, v1::CudaOptions::ATOMIC}) {
    spec.mutable_cuda()->set_attention_backward(backward);
    e = EstimateRankMemory(spec);
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ(e->activations, std::numeric_limits<int64_t>::max());
  }
}

TEST(EstimateRankMemory, ModelsThatCannotBeLaidOutAreInvalid) {
  v1::JobSpec spec = Gpt(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_model()->mutable_gpt()->set_n_head(3);  // 256 is not divisible by 3
  EXPECT_EQ(EstimateRankMemory(spec).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(EstimateRankMemory, DescribesItselfPartByPart) {
  MemoryEstimate e;
  e.parameters = 1 << 20;
  e.gradients = 2 << 20;
  e.optimizer_state = 0;
  e.activations = int64_t{3} << 30;
  e.data = 512;
  EXPECT_EQ(e.ToProto().total_bytes(), e.total());
  EXPECT_EQ(e.ToString(),
            "3.0 GiB (parameters 1.0 MiB, gradients 2.0 MiB, optimizer state 0 B, "
            "activations 3.0 GiB, data 512 B)");
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 29), "2.5 GiB");
  EXPECT_EQ(FormatBytes(std::numeric_limits<int64_t>::max()), "8.0 EiB");
}

}  // namespace
}  // namespace shardwise
