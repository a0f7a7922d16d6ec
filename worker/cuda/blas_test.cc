// The Linear GEMMs through cuBLAS against compute/cpu/linear (OpenBLAS) on the same inputs.

#include "worker/cuda/blas.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "common/testing/worst_error.h"
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
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = shardwise::testing::WorseOf(worst,
                                        std::fabs(got[i] - want[i]) / (std::fabs(want[i]) + 1.0));
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
}

// TF32 keeps 10 mantissa bits of each product's operands: visibly further from FP32. On
// shapes whose rows are 16-byte multiples, which every TF32 tensor-core kernel takes (an
// odd leading dimension may get a plain FP32 kernel even with TF32 allowed).
TEST_F(BlasTest, Tf32IsVisiblyFurtherFromTheCpu) {
  constexpr int64_t kRows = 64, kFeatures = 128, kOutputs = 96;
  const auto x = RandomFloats(kRows * kFeatures, 7), w = RandomFloats(kOutputs * kFeatures, 8),
             b = RandomFloats(kOutputs, 9);
  std::vector<float> y(kRows * kOutputs);
  cpu::LinearForward(x.data(), w.data(), b.data(), kRows, kFeatures, kOutputs, y.data());
  DeviceVector<float> dx(x), dw(w), db(b), gy(y.size());
  blas_->set_allow_tf32(true);
  ASSERT_TRUE(
      blas_->LinearForward(dx.get(), dw.get(), db.get(), kRows, kFeatures, kOutputs, gy.get())
          .ok());
  const double tf32_error = MaxError(gy.ToHost(), y);
  std::printf("max error with TF32: %.3g\n", tf32_error);
  EXPECT_GT(tf32_error, 4e-5);  // 5 times FP32's order bound
  EXPECT_LT(tf32_error, 1e-2);
}

// A bias not 16-byte aligned (a view at an odd offset of a flat buffer) is not given to
// cuBLASLt's epilogue, whose kernels may load it 16 bytes at a time: the epilogue refuses
// it and the Linear adds it unfused, to the same result.
TEST_F(BlasTest, MisalignedBiasRunsUnfused) {
  const auto x = RandomFloats(kBatch * kIn, 41), w = RandomFloats(kOut * kIn, 42);
  auto b_with_one_before = RandomFloats(kOut + 1, 43);
  std::vector<float> y(kBatch * kOut);
  cpu::LinearForward(x.data(), w.data(), b_with_one_before.data() + 1, kBatch, kIn, kOut, y.data());
  DeviceVector<float> dx(x), dw(w), db(b_with_one_before), gy(y.size());
  const float* misaligned = db.get() + 1;
  const absl::Status fused =
      blas_->LinearEpilogueForward(dx.get(), dw.get(), ConstTensorRef(misaligned), kBatch, kIn,
                                   kOut, nullptr, gy.get(), LinearEpilogue::kBias, {});
  EXPECT_EQ(fused.code(), absl::StatusCode::kUnimplemented) << fused;
  EXPECT_NE(fused.message().find("aligned to 4 bytes"), std::string::npos) << fused;
  ASSERT_TRUE(
      blas_->LinearForward(dx.get(), dw.get(), misaligned, kBatch, kIn, kOut, gy.get()).ok());
  EXPECT_LT(MaxError(gy.ToHost(), y), 8e-6);
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
  std::printf("cuBLASLt's GELU epilogue: %s\nDGELU: %s\n%s\n",
              DescribeGeluFit(formulas->value).c_str(),
              DescribeGeluFit(formulas->derivative).c_str(),
              DescribeGeluFusion(formulas->value, formulas->derivative).c_str());
  EXPECT_EQ(formulas->value.formula, GeluFormula::kTanh) << DescribeGeluFit(formulas->value);
  EXPECT_EQ(formulas->derivative.formula, GeluFormula::kTanh)
      << DescribeGeluFit(formulas->derivative);
}

std::vector<float> Magnitudes(std::vector<float> values) {
  for (float& v : values) v = std::fabs(v);
  return values;
}

// Each |got - want| within its own bound (an entry of `bounds`).
void ExpectWithin(const std::vector<float>& got, const std::vector<float>& want,
                  const std::vector<float>& bounds, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int over = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) <= bounds[i]) continue;
    if (++over <= 3) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << ", bound "
                    << bounds[i];
    }
  }
  EXPECT_EQ(over, 0) << what << ": entries past their bound";
}

constexpr double kUnit = 0x1p-24;  // FP32's unit roundoff

// How far an output may be from the CPU's. FP32: the order of its `terms`-term sum
// (whatever order each side adds in, each is within `terms` roundings of kUnit times the
// sum of the terms' magnitudes, `magnitudes`, of the exact sum) times what the epilogue's function
// makes of a change of its input (`gain`), plus the function's own error in float (`function`,
// absolute). 16 bits: the output's own rounding (of |want| + 1), far larger than either.
std::vector<float> Bounds(ScalarType type, int64_t terms, const std::vector<float>& magnitudes,
                          const std::vector<float>& gain, const std::vector<float>& function,
                          const std::vector<float>& want) {
  std::vector<float> bounds(want.size());
  const double rounding = type == ScalarType::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  for (size_t i = 0; i < want.size(); ++i) {
    bounds[i] = static_cast<float>(type == ScalarType::kFloat32
                                       ? 2 * terms * kUnit * magnitudes[i] * gain[i] + function[i]
                                       : rounding * (std::fabs(want[i]) + 1));
  }
  return bounds;
}

// The probe's measure of how far an epilogue's GELU (or derivative) is from its formula,
// relative to 1 + |y| (gemm_epilogue.h FitGelu), or 0 where it found no formula: a fast
// tanh's error is the epilogue's own, not a test failure (the worker fuses by it).
double MeasuredGeluError(const GeluFit& fit) {
  const double error = FittedError(fit);
  return std::isfinite(error) ? error : 0.0;
}

// The backward of a Linear over GELU(pre): dpre = (g W2) * GELU'(pre), W2 [features,
// hidden], `dpre` the pre as the device kept it; `measured` the derivative's error as the
// probe measured it.
template <typename E>
void CheckDGeluEpilogue(Blas& blas, ScalarType type, DeviceVector<E>& dpre, int64_t rows,
                        int64_t hidden, int64_t features, double measured) {
  const std::vector<E> g = Stored<E>(type, rows * features, 34),
                       w2 = Stored<E>(type, features * hidden, 35);
  const std::vector<float> kept = Widened(type, dpre.ToHost()), gf = Widened(type, g),
                           w2f = Widened(type, w2);
  std::vector<float> dpre_want(kept.size()), unused_dw(w2.size()), dpre_magnitudes(kept.size());
  cpu::LinearBackward<float>(kept.data(), w2f.data(), gf.data(), rows, hidden, features,
                             dpre_want.data(), unused_dw.data(), nullptr);
  cpu::LinearBackward<float>(kept.data(), Magnitudes(w2f).data(), Magnitudes(gf).data(), rows,
                             hidden, features, dpre_magnitudes.data(), unused_dw.data(), nullptr);
  // The sum's order times |GELU'(pre)|; float's GELU'(x) errs by a few roundings of
  // 1 + |x| (its terms' size), or as measured, times the sum.
  std::vector<float> derivative_gain(kept.size()), derivative_error(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) {
    const double derivative = pointwise::GeluTanhGrad(kept[i]);
    derivative_error[i] = static_cast<float>(
        std::fabs(dpre_want[i]) *
        std::max(8 * kUnit * (1 + std::fabs(kept[i])), measured * (1 + std::fabs(derivative))));
    dpre_want[i] = static_cast<float>(dpre_want[i] * derivative);
    derivative_gain[i] = static_cast<float>(std::fabs(derivative));
  }
  DeviceVector<E> dg(g), dw2(w2), dgrad(kept.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(blas.LinearInputGradEpilogue(dw2.get(), dg.get(), rows, hidden, features, dpre.get(),
                                           dgrad.get(), LinearEpilogue::kDGelu, {type, type})
                  .ok());
  ExpectWithin(
      Widened(type, dgrad.ToHost()), dpre_want,
      Bounds(type, features, dpre_magnitudes, derivative_gain, derivative_error, dpre_want),
      "(g W2) GELU'(pre)");
}

// The epilogues' outputs against the CPU: pre = x W^T + b and y = GELU_TANH(pre) from the
// FP32 sums, and the input gradient (g W2) * GELU_TANH'(pre), each rounded once to the
// output's type. Shapes the epilogue kernels take (columns multiples of 8), so cuBLASLt
// must have an algorithm. `measured`: the probe's measure of the epilogues' GELU.
template <typename E>
void CheckEpilogues(Blas& blas, ScalarType type, const GeluEpilogueFormulas& measured) {
  constexpr int64_t kRows = 64, kFeatures = 96, kHidden = 128;
  const std::vector<E> x = Stored<E>(type, kRows * kFeatures, 31),
                       w = Stored<E>(type, kHidden * kFeatures, 32),
                       b = Stored<E>(type, kHidden, 33);
  const std::vector<float> xf = Widened(type, x), wf = Widened(type, w), bf = Widened(type, b);
  std::vector<float> pre(kRows * kHidden), y(pre.size()), pre_magnitudes(pre.size());
  cpu::LinearForward<float>(xf.data(), wf.data(), bf.data(), kRows, kFeatures, kHidden, pre.data());
  cpu::LinearForward<float>(Magnitudes(xf).data(), Magnitudes(wf).data(), Magnitudes(bf).data(),
                            kRows, kFeatures, kHidden, pre_magnitudes.data());
  // GELU's gain is |GELU'(pre)|; its float evaluation, 0.5 x (1 + tanh(z)), errs by a few
  // roundings of |x| where 1 + tanh(z) cancels (x well below 0), or as measured.
  std::vector<float> gelu_gain(y.size()), unit_gain(y.size(), 1.0f), gelu_error(y.size()),
      sum_error(y.size());
  for (size_t i = 0; i < y.size(); ++i) {
    y[i] = static_cast<float>(pointwise::GeluTanh(pre[i]));
    gelu_gain[i] = static_cast<float>(std::fabs(pointwise::GeluTanhGrad(pre[i])));
    gelu_error[i] =
        static_cast<float>(std::max(8 * kUnit * (std::fabs(pre[i]) + std::fabs(y[i])),
                                    MeasuredGeluError(measured.value) * (1 + std::fabs(y[i]))));
    sum_error[i] = static_cast<float>(2 * kUnit * std::fabs(pre[i]));
  }
  const std::vector<float> pre_bounds =
      Bounds(type, kFeatures + 1, pre_magnitudes, unit_gain, sum_error, pre);
  DeviceVector<E> dx(x), dw(w), db(b), dpre(pre.size()), dy(y.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads, before the stream
  const ConstTensorRef bias(db.get(), type);
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), bias, kRows, kFeatures, kHidden,
                                         dpre.get(), dy.get(), LinearEpilogue::kGeluAuxBias,
                                         {type, type})
                  .ok());
  ExpectWithin(Widened(type, dpre.ToHost()), pre, pre_bounds, "pre");
  ExpectWithin(Widened(type, dy.ToHost()), y,
               Bounds(type, kFeatures + 1, pre_magnitudes, gelu_gain, gelu_error, y), "GELU(pre)");
  // The same shape again, its plan kept, with another bias (zeros) and other outputs: the
  // kept descriptors take this call's pointers.
  std::vector<float> unbiased(pre.size());
  cpu::LinearForward<float>(xf.data(), wf.data(), nullptr, kRows, kFeatures, kHidden,
                            unbiased.data());
  DeviceVector<E> zero_bias(b.size()), dpre_again(pre.size()), dy_again(y.size());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), ConstTensorRef(zero_bias.get(), type),
                                         kRows, kFeatures, kHidden, dpre_again.get(),
                                         dy_again.get(), LinearEpilogue::kGeluAuxBias, {type, type})
                  .ok());
  ExpectWithin(Widened(type, dpre_again.ToHost()), unbiased,
               Bounds(type, kFeatures + 1, pre_magnitudes, unit_gain, sum_error, unbiased),
               "pre, no bias");
  ExpectWithin(Widened(type, dpre.ToHost()), pre, pre_bounds, "the first call's pre");
  // The bias alone: y = pre.
  ASSERT_TRUE(blas.LinearEpilogueForward(dx.get(), dw.get(), bias, kRows, kFeatures, kHidden,
                                         nullptr, dy.get(), LinearEpilogue::kBias, {type, type})
                  .ok());
  ExpectWithin(Widened(type, dy.ToHost()), pre, pre_bounds, "pre, bias epilogue");
  CheckDGeluEpilogue(blas, type, dpre, kRows, kHidden, kFeatures,
                     MeasuredGeluError(measured.derivative));
}

TEST_F(BlasTest, EpiloguesAddTheBiasAndApplyGeluToTheFp32Sums) {
  const absl::StatusOr<GeluEpilogueFormulas> measured = blas_->ProbeGelu();
  ASSERT_TRUE(measured.ok()) << measured.status();
  ForEachStorage([&](auto element, ScalarType type) {
    CheckEpilogues<decltype(element)>(*blas_, type, *measured);
  });
}

}  // namespace
}  // namespace shardwise::cuda
