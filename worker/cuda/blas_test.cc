// The Linear GEMMs through cuBLAS against compute/cpu/linear (OpenBLAS) on the same inputs.

#include "worker/cuda/blas.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/linear.h"
#include "worker/compute/pointwise.h"
#include "worker/cuda/gemm_epilogue.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/kernels.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;
using ::shardwise::cuda::testing::ForEachStorage;
using ::shardwise::cuda::testing::Stored;
using ::shardwise::cuda::testing::Widened;

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(rng);
  return v;
}

// Max |got - want| / (|want| + 1): relative for large values, absolute near zero.
double MaxError(const std::vector<float>& got, const std::vector<float>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + 1.0));
  }
  return worst;
}

// A 16-bit output against the FP32 result: within the type's rounding (and the order of
// the sums).
void ExpectRoundedOnce(const DeviceVector<uint16_t>& y16, const std::vector<float>& y,
                       ScalarType type) {
  const std::vector<uint16_t> got16 = y16.ToHost();
  std::vector<float> got(got16.size());
  cpu::Widen(type, got16.data(), got.data(), got.size());
  const double tolerance = type == ScalarType::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  EXPECT_LT(MaxError(got, y), tolerance) << ScalarTypeName(type);
}

class BlasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    auto stream = Stream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
    auto blas = Blas::Create(stream_.get());
    ASSERT_TRUE(blas.ok()) << blas.status();
    blas_ = std::move(*blas);
  }
  Stream stream_;
  std::unique_ptr<Blas> blas_;
};

// Odd sizes, so no dimension is a multiple of a tile.
constexpr int64_t kBatch = 67, kIn = 131, kOut = 45;

TEST_F(BlasTest, Fp32LinearMatchesTheCpuWithTf32Off) {
  const auto x = RandomFloats(kBatch * kIn, 1), w = RandomFloats(kOut * kIn, 2),
             b = RandomFloats(kOut, 3), dy = RandomFloats(kBatch * kOut, 4),
             dw0 = RandomFloats(kOut * kIn, 5), db0 = RandomFloats(kOut, 6);
  std::vector<float> y(kBatch * kOut), dx(kBatch * kIn), dw(dw0), db(db0);
  cpu::LinearForward(x.data(), w.data(), b.data(), kBatch, kIn, kOut, y.data());
  cpu::LinearBackward(x.data(), w.data(), dy.data(), kBatch, kIn, kOut, dx.data(), dw.data(),
                      db.data());

  DeviceVector<float> dx_(x), dw_(w), db_(b), ddy(dy), gy(y.size()), gdx(dx.size()), gdw(dw0),
      gdb(db0);
  ASSERT_TRUE(
      blas_->LinearForward(dx_.get(), dw_.get(), db_.get(), kBatch, kIn, kOut, gy.get()).ok());
  ASSERT_TRUE(
      blas_
          ->LinearBackward(dx_.get(), dw_.get(), ddy.get(), kBatch, kIn, kOut, gdx.get(), gdw.get())
          .ok());
  // The bias's gradient is the caller's reduction (a CudaDevice adds it this way).
  ASSERT_EQ(AddColumnSums(ddy.get(), kBatch, kOut, gdb.get(), stream_.get()), cudaSuccess);
  // cuBLAS and OpenBLAS add the k products in different orders: each sum may differ by
  // up to about k ulps of its terms (k <= 131 here, terms below 1: 131 * 6e-8 = 8e-6).
  constexpr double kOrderBound = 8e-6;
  EXPECT_LT(MaxError(gy.ToHost(), y), kOrderBound);
  EXPECT_LT(MaxError(gdx.ToHost(), dx), kOrderBound);
  EXPECT_LT(MaxError(gdw.ToHost(), dw), kOrderBound);
  EXPECT_LT(MaxError(gdb.ToHost(), db), kOrderBound);

  // TF32 keeps 10 mantissa bits of each product's operands: visibly further from FP32.
  blas_->set_allow_tf32(true);
  ASSERT_TRUE(
      blas_->LinearForward(dx_.get(), dw_.get(), db_.get(), kBatch, kIn, kOut, gy.get()).ok());
  const double tf32_error = MaxError(gy.ToHost(), y);
  std::printf("max error with TF32: %.3g\n", tf32_error);
  EXPECT_GT(tf32_error, 5 * kOrderBound);
  EXPECT_LT(tf32_error, 1e-2);
}

TEST_F(BlasTest, LowPrecisionOperandsAccumulateInFp32) {
  for (ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    auto x = RandomFloats(kBatch * kIn, 11), w = RandomFloats(kOut * kIn, 12);
    // The CPU reference: the same rounded operands, FP32 products and sums.
    cpu::RoundToPrecision(type, x.data(), x.size());
    cpu::RoundToPrecision(type, w.data(), w.size());
    std::vector<float> y(kBatch * kOut);
    cpu::LinearForward<float>(x.data(), w.data(), nullptr, kBatch, kIn, kOut, y.data());

    std::vector<uint16_t> x16(x.size()), w16(w.size());
    cpu::Narrow(type, x.data(), x16.data(), x.size());
    cpu::Narrow(type, w.data(), w16.data(), w.size());
    DeviceVector<uint16_t> dx(x16), dw(w16), y16(y.size());
    DeviceVector<float> y32(y.size());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the stream
    ASSERT_TRUE(blas_
                    ->LinearForward(dx.get(), dw.get(), nullptr, kBatch, kIn, kOut, y32.get(),
                                    {type, ScalarType::kFloat32})
                    .ok());
    EXPECT_LT(MaxError(y32.ToHost(), y), 1e-5) << ScalarTypeName(type);

    // Low-precision output: the FP32 result rounded once.
    ASSERT_TRUE(
        blas_
            ->LinearForward(dx.get(), dw.get(), nullptr, kBatch, kIn, kOut, y16.get(), {type, type})
            .ok());
    ExpectRoundedOnce(y16, y, type);
  }
}

TEST_F(BlasTest, RejectsMixedOutputTypes) {
  DeviceVector<float> a(4), b(4), c(4);
  const absl::Status status = blas_->Gemm(a.get(), b.get(), c.get(), 2, 2, 1, 0.0f,
                                          {ScalarType::kBFloat16, ScalarType::kFloat16});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("BF16"), std::string::npos) << status;
}

// 16-bit storage (Device::StorageType): x, w, b and y all in the 16-bit type; y is the
// FP32 x W^T + b rounded once.
TEST_F(BlasTest, SixteenBitBiasAndOutput) {
  for (ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    auto x = RandomFloats(kBatch * kIn, 21), w = RandomFloats(kOut * kIn, 22),
         b = RandomFloats(kOut, 23);
    for (std::vector<float>* v : {&x, &w, &b}) cpu::RoundToPrecision(type, v->data(), v->size());
    std::vector<float> y(kBatch * kOut);
    cpu::LinearForward<float>(x.data(), w.data(), b.data(), kBatch, kIn, kOut, y.data());
    std::vector<uint16_t> x16(x.size()), w16(w.size()), b16(b.size());
    cpu::Narrow(type, x.data(), x16.data(), x.size());
    cpu::Narrow(type, w.data(), w16.data(), w.size());
    cpu::Narrow(type, b.data(), b16.data(), b.size());
    DeviceVector<uint16_t> dx(x16), dw(w16), db(b16), y16(y.size());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the vectors' zeroing, before the stream
    ASSERT_TRUE(blas_
                    ->LinearForward(dx.get(), dw.get(), ConstTensorRef(db.get(), type), kBatch, kIn,
                                    kOut, y16.get(), {type, type})
                    .ok());
    ExpectRoundedOnce(y16, y, type);
  }
}

// cuBLASLt documents its GELU epilogues as "GELU" and no more; PyTorch's
// _addmm_activation treats the forward's as the tanh approximation, and docs/semantics.md
// says both are, from this measurement.
TEST_F(BlasTest, GeluEpiloguesComputeTheTanhApproximation) {
  const absl::StatusOr<GeluEpilogueFormulas> formulas = blas_->ProbeGelu();
  ASSERT_TRUE(formulas.ok()) << formulas.status();
  std::printf("cuBLASLt's GELU epilogue: %s\nDGELU: %s\n", DescribeGeluFit(formulas->value).c_str(),
              DescribeGeluFit(formulas->derivative).c_str());
  EXPECT_EQ(formulas->value.formula, GeluFormula::kTanh) << DescribeGeluFit(formulas->value);
  EXPECT_EQ(formulas->derivative.formula, GeluFormula::kTanh)
      << DescribeGeluFit(formulas->derivative);
}

// The epilogues' outputs against the CPU: pre = x W^T + b and y = GELU_TANH(pre) from the
// FP32 sums, and the input gradient (g W2) * GELU_TANH'(pre), each rounded once to the
// output's type. Shapes the epilogue kernels take (columns multiples of 8), so cuBLASLt
// must have an algorithm.
template <typename E>
void CheckEpilogues(Blas& blas, ScalarType type) {
  constexpr int64_t kRows = 64, kFeatures = 96, kHidden = 128;
  const std::vector<E> x = Stored<E>(type, kRows * kFeatures, 31),
                       w = Stored<E>(type, kHidden * kFeatures, 32),
                       b = Stored<E>(type, kHidden, 33);
  std::vector<float> pre(kRows * kHidden), y(pre.size());
  cpu::LinearForward<float>(Widened(type, x).data(), Widened(type, w).data(),
                            Widened(type, b).data(), kRows, kFeatures, kHidden, pre.data());
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(pointwise::GeluTanh(pre[i]));
  DeviceVector<E> dx(x), dw(w), db(b), dpre(pre.size()), dy(y.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads, before the stream
  const ConstTensorRef bias(db.get(), type);
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), bias, kRows, kFeatures, kHidden,
                                         dpre.get(), dy.get(), LinearEpilogue::kGeluAuxBias,
                                         {type, type})
                  .ok());
  // FP32: the sums' order (as above) and float GELU's error; 16 bits: rounded once.
  const double tolerance = type == ScalarType::kFloat32    ? 1e-5
                           : type == ScalarType::kBFloat16 ? 1.0 / 128
                                                           : 1.0 / 1024;
  EXPECT_LT(MaxError(Widened(type, dpre.ToHost()), pre), tolerance);
  EXPECT_LT(MaxError(Widened(type, dy.ToHost()), y), tolerance);
  // The same shape again, its plan kept, with another bias (zeros) and other outputs: the
  // kept descriptors take this call's pointers.
  std::vector<float> unbiased(pre.size());
  cpu::LinearForward<float>(Widened(type, x).data(), Widened(type, w).data(), nullptr, kRows,
                            kFeatures, kHidden, unbiased.data());
  DeviceVector<E> zero_bias(b.size()), dpre_again(pre.size()), dy_again(y.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), ConstTensorRef(zero_bias.get(), type),
                                         kRows, kFeatures, kHidden, dpre_again.get(),
                                         dy_again.get(), LinearEpilogue::kGeluAuxBias, {type, type})
                  .ok());
  EXPECT_LT(MaxError(Widened(type, dpre_again.ToHost()), unbiased), tolerance);
  EXPECT_LT(MaxError(Widened(type, dpre.ToHost()), pre), tolerance) << "the first call's output";
  // The bias alone: y = pre.
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), bias, kRows, kFeatures, kHidden,
                                         nullptr, dy.get(), LinearEpilogue::kBias, {type, type})
                  .ok());
  EXPECT_LT(MaxError(Widened(type, dy.ToHost()), pre), tolerance);
  // The backward of a Linear over GELU(pre): dpre = (g W2) * GELU'(pre), W2 [kFeatures,
  // kHidden], pre as the device kept it.
  const std::vector<E> g = Stored<E>(type, kRows * kFeatures, 34),
                       w2 = Stored<E>(type, kFeatures * kHidden, 35);
  const std::vector<float> kept = Widened(type, dpre.ToHost());
  std::vector<float> dpre_want(kept.size()), unused_dw(w2.size());
  cpu::LinearBackward<float>(kept.data(), Widened(type, w2).data(), Widened(type, g).data(), kRows,
                             kHidden, kFeatures, dpre_want.data(), unused_dw.data(), nullptr);
  for (size_t i = 0; i < kept.size(); ++i) {
    dpre_want[i] = static_cast<float>(dpre_want[i] * pointwise::GeluTanhGrad(kept[i]));
  }
  DeviceVector<E> dg(g), dw2(w2), dgrad(kept.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(blas.LinearInputGradEpilogue(dw2.get(), dg.get(), kRows, kHidden, kFeatures,
                                           dpre.get(), dgrad.get(), LinearEpilogue::kDGelu,
                                           {type, type})
                  .ok());
  EXPECT_LT(MaxError(Widened(type, dgrad.ToHost()), dpre_want), tolerance);
}

TEST_F(BlasTest, EpiloguesAddTheBiasAndApplyGeluToTheFp32Sums) {
  ForEachStorage(
      [&](auto element, ScalarType type) { CheckEpilogues<decltype(element)>(*blas_, type); });
}

}  // namespace
}  // namespace shardwise::cuda
