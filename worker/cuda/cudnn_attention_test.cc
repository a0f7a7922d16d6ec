// cuDNN's flash attention on the GPU against the CPU's FP64 attention (BF16 tolerance),
// for the GPT's packed qkv and the Llama's grouped-query layout, and two runs bit for bit
// equal. SKIPPED without a GPU.
#include "worker/cuda/cudnn_attention.h"

#include <cmath>
#include <vector>

#include "common/testing/worst_error.h"
#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/cuda/attention_reference.h"
#include "worker/cuda/cuda_allocator.h"
#include "worker/cuda/cudnn_test_support.h"
#include "worker/cuda/gpu_test_support.h"

namespace shardwise::cuda {
namespace {

using testing::AttentionResults;
using testing::AttentionValues;
using testing::DeviceVector;

// BF16 copies of `values`, rounded in place to what the GPU reads.
std::vector<uint16_t> ToBFloat16(std::vector<double>* values) {
  std::vector<uint16_t> bits(values->size());
  for (size_t i = 0; i < bits.size(); ++i) {
    bits[i] = cpu::FloatToBFloat16(static_cast<float>((*values)[i]));
    float widened = 0;
    cpu::BFloat16ToFloat(&bits[i], &widened, 1);
    (*values)[i] = widened;
  }
  return bits;
}

std::vector<double> Widened(const std::vector<uint16_t>& bits) {
  std::vector<float> floats(bits.size());
  cpu::BFloat16ToFloat(bits.data(), floats.data(), bits.size());
  return {floats.begin(), floats.end()};
}

// Within BF16's rounding of the outputs and of the products' FP32 accumulation.
void ExpectClose(const std::vector<double>& actual, const std::vector<double>& expected,
                 const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    worst = shardwise::testing::WorseOf(
        worst, std::abs(actual[i] - expected[i]) / (1.0 + std::abs(expected[i])));
  }
  EXPECT_LT(worst, 2e-2) << what;
}

struct GpuRun {
  std::vector<uint16_t> out, dq, dk, dv;
  std::vector<float> stats;
};

// The layout's values on the GPU, forward then backward; the inputs rounded to BF16.
GpuRun RunOnGpu(CudnnAttention& attention, const AttentionLayout& l, AttentionValues* values) {
  const bool packed = l.kind == AttentionLayout::Kind::kPackedQkv;
  const std::vector<uint16_t> q = ToBFloat16(&values->q), k = ToBFloat16(&values->k),
                              v = ToBFloat16(&values->v), dout = ToBFloat16(&values->dout);
  std::vector<double> qkv_values = testing::PackedQkv(l, *values);
  const std::vector<uint16_t> qkv = ToBFloat16(&qkv_values);
  DeviceVector<uint16_t> d_qkv(qkv), d_q(q), d_k(k), d_v(v), d_dout(dout);
  DeviceVector<uint16_t> d_out(q.size()), d_dqkv(qkv.size()), d_dq(q.size()), d_dk(k.size()),
      d_dv(v.size());
  DeviceVector<float> d_stats(l.batch * l.heads * l.seq), d_dots(l.batch * l.heads * l.seq);
  AttentionPointers pointers = {
      {AttentionBuffer::kOut, d_out.get()},   {AttentionBuffer::kStats, d_stats.get()},
      {AttentionBuffer::kDout, d_dout.get()}, {AttentionBuffer::kDots, d_dots.get()},
      {AttentionBuffer::kQkv, d_qkv.get()},   {AttentionBuffer::kDqkv, d_dqkv.get()},
      {AttentionBuffer::kQ, d_q.get()},       {AttentionBuffer::kK, d_k.get()},
      {AttentionBuffer::kV, d_v.get()},       {AttentionBuffer::kDq, d_dq.get()},
      {AttentionBuffer::kDk, d_dk.get()},     {AttentionBuffer::kDv, d_dv.get()}};
  const absl::Status forward = attention.Forward(l, GraphType::kBFloat16, pointers);
  EXPECT_TRUE(forward.ok()) << forward;
  const absl::Status backward = attention.Backward(l, GraphType::kBFloat16, pointers);
  EXPECT_TRUE(backward.ok()) << backward;
  GpuRun run{d_out.ToHost(), {}, {}, {}, d_stats.ToHost()};
  if (!packed) {
    run.dq = d_dq.ToHost();
    run.dk = d_dk.ToHost();
    run.dv = d_dv.ToHost();
    return run;
  }
  const std::vector<uint16_t> dqkv = d_dqkv.ToHost();
  const int64_t width = l.heads * l.head_dim;
  for (int64_t row = 0; row < l.batch * l.seq; ++row) {
    for (int64_t part = 0; part < 3; ++part) {
      std::vector<uint16_t>& to = part == 0 ? run.dq : part == 1 ? run.dk : run.dv;
      to.insert(to.end(), dqkv.begin() + row * 3 * width + part * width,
                dqkv.begin() + row * 3 * width + (part + 1) * width);
    }
  }
  return run;
}

class CudnnAttentionTest : public ::testing::TestWithParam<AttentionLayout> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
    }
  }

  // The cuDNN loaded and GPU 0's compute capability, which the attention is made for.
  static CudnnFacts Facts() {
    const absl::StatusOr<CudnnFacts> facts = LoadedCudnnFacts(0);
    EXPECT_TRUE(facts.ok()) << facts.status();
    return facts.value_or(CudnnFacts{});
  }

  // One run of the layout with the `backward` kind, checked against the CPU's FP64.
  GpuRun RunAndCompare(AttentionBackwardKind backward) {
    CudaCachingAllocator allocator(stream_);
    auto attention = CudnnAttention::Create(Facts(), stream_, &allocator, backward);
    EXPECT_TRUE(attention.ok()) << attention.status();
    if (!attention.ok()) return {};
    return CompareWithCpu(**attention);
  }

  // One run of the layout on `attention`, checked against the CPU's FP64.
  GpuRun CompareWithCpu(CudnnAttention& attention) {
    const AttentionLayout layout = GetParam();
    AttentionValues values = testing::RandomAttentionValues(layout, 7);
    GpuRun run = RunOnGpu(attention, layout, &values);
    const AttentionResults expected = testing::ReferenceAttention(layout, values);  // rounded
    ExpectClose(Widened(run.out), expected.out, "out");
    ExpectClose({run.stats.begin(), run.stats.end()}, expected.stats, "stats");
    ExpectClose(Widened(run.dq), expected.dq, "dq");
    ExpectClose(Widened(run.dk), expected.dk, "dk");
    ExpectClose(Widened(run.dv), expected.dv, "dv");
    return run;
  }

  cudaStream_t stream_ = nullptr;
};

TEST_P(CudnnAttentionTest, EqualsTheCpusAttentionAndRepeatsBitForBit) {
  SKIP_WHERE_CUDNN_REFUSES(GetParam(), GraphType::kBFloat16);
  const GpuRun first = RunAndCompare(AttentionBackwardKind::kDeterministic);
  const GpuRun second = RunAndCompare(AttentionBackwardKind::kDeterministic);
  EXPECT_EQ(first.out, second.out);
  EXPECT_EQ(first.dq, second.dq);
  EXPECT_EQ(first.dk, second.dk);
  EXPECT_EQ(first.dv, second.dv);
}

// The atomic backward (cuda.attention_backward ATOMIC): the same values within BF16's
// tolerance, also with a reused accumulator; its dq's last bits may differ from run to
// run, so no bit-for-bit repeat is asked.
TEST_P(CudnnAttentionTest, TheAtomicBackwardEqualsTheCpusAttention) {
  SKIP_WHERE_CUDNN_REFUSES(GetParam(), GraphType::kBFloat16, AttentionBackwardKind::kAtomic);
  // Twice on one allocator: the second backward's FP32 dQ accumulator is the first's
  // block again, holding its sums, which cuDNN (9.6 and newer) must clear itself (a fresh
  // cudaMalloc'd block would often be zero already and hide it).
  CudaCachingAllocator allocator(stream_);
  auto attention =
      CudnnAttention::Create(Facts(), stream_, &allocator, AttentionBackwardKind::kAtomic);
  ASSERT_TRUE(attention.ok()) << attention.status();
  for (int run = 0; run < 2; ++run) CompareWithCpu(**attention);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, CudnnAttentionTest,
    ::testing::Values(AttentionLayout::Packed({2, 256, 4, 64}),          // the GPT's
                      AttentionLayout::Packed({1, 200, 2, 64}),          // not a multiple of 128
                      AttentionLayout::Separate({2, 256, 8, 64}, 2),     // GQA
                      AttentionLayout::Separate({1, 128, 4, 128}, 4)));  // the Llama's head size

}  // namespace
}  // namespace shardwise::cuda
