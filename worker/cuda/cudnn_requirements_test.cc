#include "worker/cuda/cudnn_requirements.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise::cuda {
namespace {

const AttentionLayout kGpt2 = AttentionLayout::Packed({8, 1024, 12, 64});
constexpr CudnnFacts kH200 = {91900, 90};

void ExpectRefused(const absl::Status& status, const std::string& words) {
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find(words), std::string::npos) << status;
}

TEST(CudnnRequirementsTest, VersionsReadAsCudnnWritesThem) {
  EXPECT_EQ(CudnnVersionText(91900), "9.19.0");
  EXPECT_EQ(CudnnVersionText(90100), "9.1.0");
  EXPECT_EQ(CudnnVersionText(8907), "8.9.7");
}

TEST(CudnnRequirementsTest, GptAndLlamaShapesRunOnAnH200) {
  EXPECT_TRUE(CheckCudnnAttention(kH200, kGpt2, GraphType::kBFloat16).ok());
  EXPECT_TRUE(CheckCudnnAttention(kH200, kGpt2, GraphType::kHalf).ok());
  const AttentionLayout llama = AttentionLayout::Separate({1, 1000, 32, 128}, 8);
  EXPECT_TRUE(CheckCudnnAttention(kH200, llama, GraphType::kBFloat16).ok());
  EXPECT_TRUE(CheckCudnnAttention({91900, 80}, llama, GraphType::kBFloat16).ok());  // A100
}

TEST(CudnnRequirementsTest, AnFp32JobIsToldItsAttentionStaysOnCudaCores) {
  ExpectRefused(CheckCudnnAttention(kH200, kGpt2, GraphType::kFloat), "not FP32");
}

TEST(CudnnRequirementsTest, AnOldCudnnIsNamed) {
  ExpectRefused(CheckCudnnAttention({8907, 90}, kGpt2, GraphType::kBFloat16),
                "cuDNN 8.9.7 found; it needs cuDNN 9.0.0 or newer");
  // 9.15 takes a multiple of 128, not 1000.
  EXPECT_TRUE(CheckCudnnAttention({91500, 90}, kGpt2, GraphType::kBFloat16).ok());
  ExpectRefused(
      CheckCudnnAttention({91500, 90}, AttentionLayout::Packed({8, 1000, 12, 64}),
                          GraphType::kBFloat16),
      "cuDNN 9.15.0 found, whose fused attention needs a sequence length that is a multiple of "
      "128 (this job's is 1000)");
}

// NVIDIA's frontend refuses 9.10.0 and 9.10.1 for their 16-bit kernels' known bugs; the
// versions round them run.
TEST(CudnnRequirementsTest, VersionsWithKnownBugsAreNamed) {
  for (const CudnnFacts faulty : {CudnnFacts{91000, 90}, CudnnFacts{91001, 90}}) {
    ExpectRefused(CheckCudnnAttention(faulty, kGpt2, GraphType::kBFloat16),
                  absl::StrCat("cuDNN ", CudnnVersionText(faulty.version),
                               " found, whose BF16 and FP16 flash-attention kernels have known "
                               "bugs; cuDNN 9.10.2 or newer runs it"));
  }
  EXPECT_TRUE(CheckCudnnAttention({90900, 90}, kGpt2, GraphType::kBFloat16).ok());
  EXPECT_TRUE(CheckCudnnAttention({91002, 90}, kGpt2, GraphType::kBFloat16).ok());
}

TEST(CudnnRequirementsTest, ASingleTokenSequenceIsNamed) {
  ExpectRefused(
      CheckCudnnAttention(kH200, AttentionLayout::Packed({8, 1, 12, 64}), GraphType::kBFloat16),
      "the sequence length is 1; its backward needs at least 2");
  EXPECT_TRUE(
      CheckCudnnAttention(kH200, AttentionLayout::Packed({8, 2, 12, 64}), GraphType::kBFloat16)
          .ok());
}

TEST(CudnnRequirementsTest, GpusAndHeadSizesOutsideItsKernelsAreNamed) {
  ExpectRefused(CheckCudnnAttention({91900, 75}, kGpt2, GraphType::kHalf),
                "compute capability is 7.5");
  ExpectRefused(
      CheckCudnnAttention(kH200, AttentionLayout::Packed({1, 128, 4, 60}), GraphType::kBFloat16),
      "the head size is 60");
  EXPECT_TRUE(
      CheckCudnnAttention(kH200, AttentionLayout::Packed({1, 128, 4, 256}), GraphType::kBFloat16)
          .ok());
  ExpectRefused(CheckCudnnAttention({91900, 80}, AttentionLayout::Packed({1, 128, 4, 256}),
                                    GraphType::kBFloat16),
                "at most 128");
  ExpectRefused(CheckCudnnAttention(kH200, AttentionLayout::Separate({1, 128, 6, 64}, 4),
                                    GraphType::kBFloat16),
                "6 query heads are not a multiple of 4 K/V heads");
}

// The atomic backward needs cuDNN 9.6, which clears its FP32 dQ accumulator itself; a
// job that asks for it on an older cuDNN takes the CUDA-core kernel, or fails naming both
// where it insists on cuDNN.
TEST(CudnnRequirementsTest, TheAtomicBackwardNeedsCudnn96) {
  const AttentionBackwardKind atomic = AttentionBackwardKind::kAtomic;
  EXPECT_TRUE(CheckCudnnAttention({90600, 90}, kGpt2, GraphType::kBFloat16, atomic).ok());
  EXPECT_TRUE(CheckCudnnAttention({90500, 90}, kGpt2, GraphType::kBFloat16).ok());
  ExpectRefused(CheckCudnnAttention({90500, 90}, kGpt2, GraphType::kBFloat16, atomic),
                "cuDNN 9.5.0 found, and the atomic backward (cuda.attention_backward ATOMIC) "
                "needs cuDNN 9.6.0 or newer");
  // The same rule where a CudnnAttention is created (CudnnAttention::Create), whoever asks.
  EXPECT_TRUE(CheckCudnnBackwardKind({90600, 90}, atomic).ok());
  EXPECT_TRUE(CheckCudnnBackwardKind({90000, 90}, AttentionBackwardKind::kDeterministic).ok());
  ExpectRefused(CheckCudnnBackwardKind({90500, 90}, atomic),
                "cuDNN 9.5.0 found, and the atomic backward (cuda.attention_backward ATOMIC) "
                "needs cuDNN 9.6.0 or newer");
  using Options = v1::CudaOptions;
  EXPECT_EQ(ChooseFusedAttentionKernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, {90500, 90},
                                       kGpt2, ScalarType::kBFloat16, atomic)
                ->kernel,
            FusedAttentionKernel::kCudaCores);
  ExpectRefused(
      ChooseFusedAttentionKernel(Options::CUDNN, {90500, 90}, kGpt2, ScalarType::kBFloat16, atomic)
          .status(),
      "needs cuDNN 9.6.0 or newer (the job asks for it: cuda.fused_attention_kernel CUDNN)");
  EXPECT_EQ(BackwardKindOf(Options::ATOMIC), atomic);
  EXPECT_EQ(BackwardKindOf(Options::ATTENTION_BACKWARD_UNSPECIFIED),
            AttentionBackwardKind::kDeterministic);
  EXPECT_EQ(BackwardKindOf(Options::DETERMINISTIC), AttentionBackwardKind::kDeterministic);
}

// On Blackwell (compute capability 10.x and up) the deterministic backward's bits are not
// guaranteed: such a job's FUSED attention takes the CUDA-core kernel unless it asks for
// the atomic backward, which cuDNN then runs.
TEST(CudnnRequirementsTest, TheDeterministicBackwardIsPromisedOnAmpereAndHopperOnly) {
  const AttentionBackwardKind deterministic = AttentionBackwardKind::kDeterministic;
  EXPECT_TRUE(CheckCudnnBackwardKind({91900, 80}, deterministic).ok());
  EXPECT_TRUE(CheckCudnnBackwardKind({91900, 90}, deterministic).ok());
  ExpectRefused(CheckCudnnBackwardKind({91900, 100}, deterministic),
                "compute capability is 10.0, where its deterministic backward is not guaranteed");
  EXPECT_TRUE(CheckCudnnBackwardKind({91900, 100}, AttentionBackwardKind::kAtomic).ok());
  using Options = v1::CudaOptions;
  EXPECT_EQ(ChooseFusedAttentionKernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, {91900, 100},
                                       kGpt2, ScalarType::kBFloat16, deterministic)
                ->kernel,
            FusedAttentionKernel::kCudaCores);
  EXPECT_EQ(ChooseFusedAttentionKernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, {91900, 100},
                                       kGpt2, ScalarType::kBFloat16, AttentionBackwardKind::kAtomic)
                ->kernel,
            FusedAttentionKernel::kCudnn);
}

// No library loaded (version 0) is named as such, not as "cuDNN 0.0.0".
TEST(CudnnRequirementsTest, AMissingLibraryIsNamed) {
  ExpectRefused(CheckCudnnAttention({0, 90}, kGpt2, GraphType::kBFloat16),
                "no cuDNN library was loaded");
}

// The job's choice: unspecified takes cuDNN where it runs, else the CUDA-core kernel;
// CUDNN insists (the refusal names the option); CUDA_CORES never asks cuDNN.
TEST(CudnnRequirementsTest, TheKernelFollowsTheJobAndWhatCanRun) {
  using Options = v1::CudaOptions;
  const auto choose = [](Options::FusedAttentionKernel requested, const CudnnFacts& facts,
                         ScalarType operands) {
    return ChooseFusedAttentionKernel(requested, facts, kGpt2, operands);
  };
  const auto kernel = [&](Options::FusedAttentionKernel requested, const CudnnFacts& facts,
                          ScalarType operands) {
    return choose(requested, facts, operands).value().kernel;
  };
  EXPECT_EQ(kernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, ScalarType::kBFloat16),
            FusedAttentionKernel::kCudnn);
  EXPECT_EQ(kernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, ScalarType::kFloat16),
            FusedAttentionKernel::kCudnn);
  EXPECT_EQ(kernel(Options::CUDNN, kH200, ScalarType::kBFloat16), FusedAttentionKernel::kCudnn);
  // FP32 operands, an old cuDNN, an old GPU: the CUDA-core kernel, unless CUDNN was asked.
  EXPECT_EQ(kernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, ScalarType::kFloat32),
            FusedAttentionKernel::kCudaCores);
  EXPECT_EQ(kernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, {8907, 90}, ScalarType::kBFloat16),
            FusedAttentionKernel::kCudaCores);
  EXPECT_EQ(kernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, {91900, 75}, ScalarType::kBFloat16),
            FusedAttentionKernel::kCudaCores);
  ExpectRefused(choose(Options::CUDNN, kH200, ScalarType::kFloat32).status(),
                "not FP32 (an FP32 job's FUSED attention runs on CUDA cores) (the job asks for "
                "it: cuda.fused_attention_kernel CUDNN)");
  ExpectRefused(choose(Options::CUDNN, {8907, 90}, ScalarType::kBFloat16).status(),
                "cuDNN 8.9.7 found");
  EXPECT_EQ(kernel(Options::CUDA_CORES, kH200, ScalarType::kBFloat16),
            FusedAttentionKernel::kCudaCores);
  EXPECT_EQ(GraphIo(ScalarType::kBFloat16), GraphType::kBFloat16);
  EXPECT_EQ(GraphIo(ScalarType::kFloat16), GraphType::kHalf);
  EXPECT_EQ(GraphIo(ScalarType::kFloat32), GraphType::kFloat);
}

// The reasons the worker logs: what the rules found, or that the job asked.
TEST(CudnnRequirementsTest, EachChoiceSaysWhy) {
  using Options = v1::CudaOptions;
  EXPECT_EQ(ChooseFusedAttentionKernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, kGpt2,
                                       ScalarType::kBFloat16)
                ->reason,
            "cuDNN 9.19.0 flash attention");
  EXPECT_EQ(
      ChooseFusedAttentionKernel(Options::CUDA_CORES, kH200, kGpt2, ScalarType::kBFloat16)->reason,
      "the CUDA-core kernel; the job asks for it");
  const auto fp32 = ChooseFusedAttentionKernel(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200,
                                               kGpt2, ScalarType::kFloat32);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  EXPECT_NE(fp32->reason.find("the CUDA-core kernel; cuDNN's fused attention (attention: FUSED "
                              "on CUDA) cannot run: its kernels take BF16 or FP16 operands"),
            std::string::npos)
      << fp32->reason;
}

// After the rules, cuDNN's own plans decide: built, cuDNN; not, the CUDA-core kernel with
// cuDNN's error as the reason, or, where the job insists, the job's failure naming it.
TEST(CudnnRequirementsTest, PlansCuDnnCannotBuildFallBackUnlessTheJobInsists) {
  using Options = v1::CudaOptions;
  const absl::Status no_engine = absl::InternalError("cuDNN: no engine for graph forward");
  const auto built =
      ConfirmCudnnAttention(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, absl::OkStatus());
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->kernel, FusedAttentionKernel::kCudnn);
  const auto fallback =
      ConfirmCudnnAttention(Options::FUSED_ATTENTION_KERNEL_UNSPECIFIED, kH200, no_engine);
  ASSERT_TRUE(fallback.ok()) << fallback.status();
  EXPECT_EQ(fallback->kernel, FusedAttentionKernel::kCudaCores);
  EXPECT_NE(fallback->reason.find("cuDNN 9.19.0 on compute capability 9.0 could not build its "
                                  "plans: cuDNN: no engine for graph forward"),
            std::string::npos)
      << fallback->reason;
  ExpectRefused(ConfirmCudnnAttention(Options::CUDNN, kH200, no_engine).status(),
                "cuDNN 9.19.0 on compute capability 9.0 could not build its plans: cuDNN: no "
                "engine for graph forward (the job asks for it: cuda.fused_attention_kernel "
                "CUDNN)");
}

}  // namespace
}  // namespace shardwise::cuda
