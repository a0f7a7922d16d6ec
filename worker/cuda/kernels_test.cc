// The CUDA kernels against the CPU runtime's implementations of the same formulas
// (compute/casts, compute/cpu/, fsdp/optimizer): casts bit for bit, the rest within
// the rounding of the device's math functions and FMA contraction.

#include "worker/cuda/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/compute/cpu/losses.h"
#include "worker/compute/cpu/optimizers.h"
#include "worker/compute/pointwise.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/fsdp/optimizer.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;
using ::shardwise::cuda::testing::ExpectNear;
using ::shardwise::cuda::testing::RandomFloats;

class KernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_GPU(); }
};

// Every float class a cast must get right: normals over the whole exponent range (random
// bit patterns), halfway cases, subnormals of both targets, overflow to inf, inf, NaN.
std::vector<float> CastInputs() {
  std::vector<float> v;
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    v.push_back(f);
  }
  const float specials[] = {0.0f,
                            -0.0f,
                            1.0f,
                            65504.0f,
                            65520.0f,
                            1e30f,
                            5.96e-8f,
                            2.98e-8f,
                            1e-40f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  v.insert(v.end(), std::begin(specials), std::end(specials));
  // Exact halfway points between neighbouring BF16 values: ties go to even.
  for (uint32_t hi = 0x3f80; hi < 0x3f90; ++hi) {
    const uint32_t bits = (hi << 16) | 0x8000;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    v.push_back(f);
  }
  return v;
}

bool SameValue(uint16_t a, uint16_t b, ScalarType type) {
  if (a == b) return true;
  // NaN payloads may differ (the device returns its canonical NaN); both must be NaN.
  const float fa = type == ScalarType::kBFloat16 ? cpu::BFloat16ToFloat(a) : cpu::HalfToFloat(a);
  const float fb = type == ScalarType::kBFloat16 ? cpu::BFloat16ToFloat(b) : cpu::HalfToFloat(b);
  return std::isnan(fa) && std::isnan(fb);
}

TEST_F(KernelsTest, CastsMatchTheCpuBitForBitAlignedAndNot) {
  const std::vector<float> input = CastInputs();
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    // Offset 0 takes the vector path, offset 1 (misaligned) the scalar one; both must agree.
    for (size_t offset : {0, 1}) {
      const size_t n = input.size() - offset;
      std::vector<uint16_t> expected(n);
      cpu::Narrow(type, input.data() + offset, expected.data(), n);
      DeviceVector<float> in(input);
      DeviceVector<uint16_t> narrow(n + 1);
      ASSERT_EQ(Narrow(type, in.get() + offset, narrow.get() + offset, n, nullptr), cudaSuccess);
      std::vector<uint16_t> got = narrow.ToHost();
      int mismatches = 0;
      for (size_t i = 0; i < n; ++i) {
        if (!SameValue(got[i + offset], expected[i], type)) ++mismatches;
      }
      EXPECT_EQ(mismatches, 0) << ScalarTypeName(type) << " offset " << offset;

      // Widening is exact: back to the CPU's widening of the same bits.
      DeviceVector<float> wide(n + 1);
      ASSERT_EQ(Widen(type, narrow.get() + offset, wide.get() + offset, n, nullptr), cudaSuccess);
      std::vector<float> widened = wide.ToHost();
      std::vector<float> expected_wide(n);
      cpu::Widen(type, got.data() + offset, expected_wide.data(), n);
      for (size_t i = 0; i < n; ++i) {
        if (std::isnan(expected_wide[i])) {
          ASSERT_TRUE(std::isnan(widened[i + offset]));
        } else {
          ASSERT_EQ(widened[i + offset], expected_wide[i]) << i;
        }
      }
    }
  }
}

TEST_F(KernelsTest, RoundToPrecisionEqualsNarrowThenWiden) {
  std::vector<float> values = RandomFloats(10007, 3, 100.0f);
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    std::vector<float> expected(values);
    cpu::RoundToPrecision(type, expected.data(), expected.size());
    DeviceVector<float> d(values);
    ASSERT_EQ(RoundToPrecision(type, d.get(), values.size(), nullptr), cudaSuccess);
    EXPECT_EQ(d.ToHost(), expected) << ScalarTypeName(type);
  }
}

// The device computes the activations in float with its erff, tanhf and expf
// (pointwise.h's *Float forms): against the exact formulas in double (the CPU's double
// instantiation), within the float forms' bound (pointwise_test: 3e-7 · max(1, |x|) with
// glibc's functions) plus the device functions' difference from glibc's (2 ulp): 4e-7 ·
// max(1, |x|), times |dy| in the backward, plus the product's rounding.
TEST_F(KernelsTest, ActivationsMatchTheExactFormulasWithinTheFloatBound) {
  const std::vector<float> x = RandomFloats(50001, 11, 3.0f);
  const std::vector<float> dy = RandomFloats(x.size(), 12);
  const std::vector<double> x64(x.begin(), x.end()), dy64(dy.begin(), dy.end());
  for (auto [act, cpu_act] :
       {std::pair{Activation::kRelu, v1::RELU}, std::pair{Activation::kGelu, v1::GELU},
        std::pair{Activation::kGeluTanh, v1::GELU_TANH}, std::pair{Activation::kSilu, v1::SILU}}) {
    std::vector<double> want_y(x.size()), want_dx(x.size());
    cpu::ActivationForward(cpu_act, x64.data(), x.size(), want_y.data());
    cpu::ActivationBackward(cpu_act, x64.data(), dy64.data(), x.size(), want_dx.data());
    DeviceVector<float> dx_in(x), ddy(dy), y(x.size()), dx(x.size());
    ASSERT_EQ(ActivationForward(act, dx_in.get(), x.size(), y.get(), nullptr), cudaSuccess);
    ASSERT_EQ(ActivationBackward(act, dx_in.get(), ddy.get(), x.size(), dx.get(), nullptr),
              cudaSuccess);
    const std::vector<float> got_y = y.ToHost(), got_dx = dx.ToHost();
    int outside = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double scale = 4e-7 * std::max(1.0, std::fabs(x64[i]));
      const double dx_bound = std::fabs(dy64[i]) * scale + 1.2e-7 * std::fabs(want_dx[i]);
      if (std::fabs(got_y[i] - want_y[i]) > scale || std::fabs(got_dx[i] - want_dx[i]) > dx_bound) {
        if (++outside <= 5) {
          ADD_FAILURE() << v1::Activation_Name(cpu_act) << " x " << x[i] << " y " << got_y[i]
                        << " (want " << want_y[i] << ") dx " << got_dx[i] << " (want " << want_dx[i]
                        << ")";
        }
      }
    }
    EXPECT_EQ(outside, 0) << v1::Activation_Name(cpu_act);
  }
}

// The cross-entropy's formula in double for `rows` rows of `classes` logits (mean loss
// times `scale`, and each logit's gradient), and the bounds of the kernel's float
// arithmetic around it (compute/pointwise.h, whose CPU test checks the same terms).
struct ExactCrossEntropy {
  double loss = 0, loss_bound = 0;
  std::vector<double> grad, grad_bound;
};

ExactCrossEntropy ExactLossAndBounds(const std::vector<float>& logits,
                                     const std::vector<int64_t>& labels, int64_t classes,
                                     float scale) {
  const int64_t rows = static_cast<int64_t>(labels.size());
  const double grad_scale = static_cast<double>(scale) / static_cast<double>(rows);
  ExactCrossEntropy exact;
  exact.grad.resize(logits.size());
  exact.grad_bound.resize(logits.size());
  for (int64_t i = 0; i < rows; ++i) {
    const float* row = logits.data() + i * classes;
    const auto [min, max] = std::minmax_element(row, row + classes);
    const double spread = static_cast<double>(*max) - *min;
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - *max);
    const double log_sum = std::log(sum) + *max;
    exact.loss += (log_sum - row[labels[i]]) * scale / static_cast<double>(rows);
    exact.loss_bound = std::max(exact.loss_bound, pointwise::LogSumExpError(spread) * scale);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(static_cast<double>(row[j]) - log_sum);
      const double want = (j == labels[i] ? p - 1 : p) * grad_scale;
      exact.grad[i * classes + j] = want;
      // + the rounding of the kernel's float grad_scale, 2^-24 of the result.
      exact.grad_bound[i * classes + j] =
          pointwise::CrossEntropyGradientError(p, want, grad_scale, spread,
                                               static_cast<double>(classes)) +
          std::abs(want) * 0x1p-24;
    }
  }
  return exact;
}

void ExpectWithinBounds(const std::vector<float>& got, const ExactCrossEntropy& exact) {
  ASSERT_EQ(got.size(), exact.grad.size());
  int outside = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    if (!(std::abs(got[k] - exact.grad[k]) <= exact.grad_bound[k]) && ++outside <= 3) {
      ADD_FAILURE() << "gradient [" << k << "] " << got[k] << " (exact " << exact.grad[k]
                    << ", bound " << exact.grad_bound[k] << ")";
    }
  }
  EXPECT_EQ(outside, 0);
}

// The cross-entropy against its formula in double, within its float arithmetic's bounds
// (the exponentials in float, as PyTorch's CUDA kernels: the CPU's float path is another
// float computation, so the two are compared only through the formula).
TEST_F(KernelsTest, LossesMatchTheirFormulasAndAreDeterministic) {
  const int64_t batch = 300, classes = 37;
  const std::vector<float> logits = RandomFloats(batch * classes, 21, 4.0f);
  std::vector<int64_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = (i * 7) % classes;
  const ExactCrossEntropy exact = ExactLossAndBounds(logits, labels, classes, 0.5f);

  DeviceVector<float> dlogits(logits), grad(logits.size());
  DeviceVector<int64_t> dlabels(labels);
  DeviceVector<double> rows(batch), loss(1);
  ASSERT_EQ(CrossEntropy(dlogits.get(), dlabels.get(), batch, classes, 0.5f, grad.get(), rows.get(),
                         loss.get(), nullptr),
            cudaSuccess);
  const double got_loss = loss.ToHost()[0];
  EXPECT_NEAR(got_loss, exact.loss, exact.loss_bound);
  ExpectWithinBounds(grad.ToHost(), exact);
  ASSERT_EQ(CrossEntropy(dlogits.get(), dlabels.get(), batch, classes, 0.5f, grad.get(), rows.get(),
                         loss.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(loss.ToHost()[0], got_loss) << "a second run gives other bits";
  // Written over the logits (as the model does): the same loss and gradient bits.
  DeviceVector<float> in_place(logits);
  ASSERT_EQ(CrossEntropy(in_place.get(), dlabels.get(), batch, classes, 0.5f, in_place.get(),
                         rows.get(), loss.get(), nullptr),
            cudaSuccess);
  EXPECT_EQ(loss.ToHost()[0], got_loss) << "in place";
  EXPECT_EQ(in_place.ToHost(), grad.ToHost()) << "in place";
  // A label outside the classes: NaN, as on the CPU, not a read outside the row.
  labels[batch - 1] = classes;
  DeviceVector<int64_t> bad_labels(labels);
  ASSERT_EQ(CrossEntropy(dlogits.get(), bad_labels.get(), batch, classes, 0.5f, grad.get(),
                         rows.get(), loss.get(), nullptr),
            cudaSuccess);
  EXPECT_TRUE(std::isnan(loss.ToHost()[0]));

  const int64_t n = 3 * 100003;
  const std::vector<float> pred = RandomFloats(n, 22), target = RandomFloats(n, 23);
  std::vector<float> want_dpred(n);
  const double want_mse =
      cpu::MeanSquaredError(pred.data(), target.data(), 3, 100003, 2.0f, want_dpred.data());
  DeviceVector<float> dp(pred), dt(target), dpred(n);
  DeviceVector<double> partials(ReductionPartials(n)), mse(1);
  ASSERT_EQ(MeanSquaredError(dp.get(), dt.get(), n, 2.0f, dpred.get(), partials.get(), mse.get(),
                             nullptr),
            cudaSuccess);
  EXPECT_NEAR(mse.ToHost()[0], want_mse, 1e-12 * want_mse);
  ExpectNear(dpred.ToHost(), want_dpred, 0.0f, 0.0f, "mse gradient");  // same float ops
}

// A bias gradient at GPT-2's shape (8192 token rows, 768 columns) plus odd ones (fewer
// rows than lanes, a partial column tile): each column sum (in double, by row lanes)
// added to what db held, rounded once; the same bits on a second run.
TEST_F(KernelsTest, ColumnSumsAddEveryRowDeterministically) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{8192, 768}, {1000, 3}, {1, 5}}) {
    const std::vector<float> dy = RandomFloats(rows * cols, 41), db0 = RandomFloats(cols, 43);
    std::vector<float> want(cols);
    for (int64_t j = 0; j < cols; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < rows; ++i) sum += dy[i * cols + j];
      want[j] = db0[j] + static_cast<float>(sum);
    }
    DeviceVector<float> ddy(dy), first(db0), second(db0);
    ASSERT_EQ(AddColumnSums(ddy.get(), rows, cols, first.get(), nullptr), cudaSuccess);
    ASSERT_EQ(AddColumnSums(ddy.get(), rows, cols, second.get(), nullptr), cudaSuccess);
    // The double sums differ from the loop's by their order only: far below the rounding.
    ExpectNear(first.ToHost(), want, 2e-7f, 1e-4f, "column sums");
    const std::vector<float> a = first.ToHost(), b = second.ToHost();
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << rows << "x" << cols;
  }
}

// 16-bit storage (Device::StorageType): a kernel that reads and writes BF16 or FP16 values
// itself gives the bits of its FP32 form on the widened values, rounded once as stored
// (storage_elements.cuh): the cross-entropy (in place, as the model runs it), the bias
// broadcast into y, the bias gradient's column sums and the squared error (the embedding
// lookup and the norms: gpt_layers_test).
TEST_F(KernelsTest, SixteenBitStorageEqualsFp32StorageRounded) {
  constexpr int64_t rows = 37, cols = 301;
  for (ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    SCOPED_TRACE(ScalarTypeName(type));
    std::vector<float> values = RandomFloats(rows * cols, 61, 4.0f);
    cpu::RoundToPrecision(type, values.data(), values.size());
    std::vector<uint16_t> narrow(values.size());
    cpu::Narrow(type, values.data(), narrow.data(), values.size());
    std::vector<int64_t> labels(rows);
    for (int64_t i = 0; i < rows; ++i) labels[i] = (i * 7) % cols;
    DeviceVector<int64_t> dlabels(labels);
    DeviceVector<double> row_loss(rows), loss32(1), loss16(1);
    // Cross-entropy: FP32 storage, then the model's rounding; 16-bit storage in place.
    DeviceVector<float> logits32(values);
    ASSERT_EQ(CrossEntropy(logits32.get(), dlabels.get(), rows, cols, 0.5f, logits32.get(),
                           row_loss.get(), loss32.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(RoundToPrecision(type, logits32.get(), values.size(), nullptr), cudaSuccess);
    DeviceVector<uint16_t> logits16(narrow);
    ASSERT_EQ(CrossEntropy(ConstTensorRef(logits16.get(), type), dlabels.get(), rows, cols, 0.5f,
                           TensorRef(logits16.get(), type), row_loss.get(), loss16.get(), nullptr),
              cudaSuccess);
    std::vector<float> grad16(values.size()), grad32 = logits32.ToHost();
    const std::vector<uint16_t> got16 = logits16.ToHost();
    cpu::Widen(type, got16.data(), grad16.data(), grad16.size());
    EXPECT_EQ(grad16, grad32);
    EXPECT_EQ(loss16.ToHost(), loss32.ToHost());
    // The bias into y, and the bias gradient from 16-bit dy.
    DeviceVector<uint16_t> bias16(std::vector<uint16_t>(narrow.begin(), narrow.begin() + cols)),
        y16(values.size());
    ASSERT_EQ(BroadcastRows(ConstTensorRef(bias16.get(), type), rows, cols,
                            TensorRef(y16.get(), type), nullptr),
              cudaSuccess);
    const std::vector<uint16_t> broadcast = y16.ToHost();
    for (int64_t i = 0; i < rows; ++i) {
      ASSERT_TRUE(std::equal(broadcast.begin() + i * cols, broadcast.begin() + (i + 1) * cols,
                             narrow.begin()))
          << "row " << i;
    }
    DeviceVector<float> dy32(values), db32(cols), db16(cols);
    ASSERT_EQ(AddColumnSums(dy32.get(), rows, cols, db32.get(), nullptr), cudaSuccess);
    DeviceVector<uint16_t> dy16(narrow);
    ASSERT_EQ(AddColumnSums(ConstTensorRef(dy16.get(), type), rows, cols, db16.get(), nullptr),
              cudaSuccess);
    EXPECT_EQ(db16.ToHost(), db32.ToHost());
    // The squared error, 16-bit predictions against FP32 targets (the model's).
    const std::vector<float> target = RandomFloats(values.size(), 62);
    DeviceVector<float> pred32(values), target32(target), dpred32(values.size());
    DeviceVector<double> partials(ReductionPartials(values.size()));
    ASSERT_EQ(MeanSquaredError(pred32.get(), target32.get(), rows * cols, 0.5f, dpred32.get(),
                               partials.get(), loss32.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(RoundToPrecision(type, dpred32.get(), values.size(), nullptr), cudaSuccess);
    DeviceVector<uint16_t> pred16(narrow), dpred16(values.size());
    ASSERT_EQ(
        MeanSquaredError(ConstTensorRef(pred16.get(), type), target32.get(), rows * cols, 0.5f,
                         TensorRef(dpred16.get(), type), partials.get(), loss16.get(), nullptr),
        cudaSuccess);
    const std::vector<uint16_t> dpred_bits = dpred16.ToHost();
    std::vector<float> dpred_wide(values.size());
    cpu::Widen(type, dpred_bits.data(), dpred_wide.data(), dpred_wide.size());
    EXPECT_EQ(dpred_wide, dpred32.ToHost());
    EXPECT_EQ(loss16.ToHost(), loss32.ToHost());
  }
}

// The elementwise kernels likewise: GELU forward and backward (in place, as the block runs
// it) and a residual sum, in 16-bit storage against FP32 storage then rounding.
TEST_F(KernelsTest, SixteenBitElementwiseEqualsFp32Rounded) {
  const size_t n = 100003;
  for (ScalarType type : {ScalarType::kBFloat16, ScalarType::kFloat16}) {
    SCOPED_TRACE(ScalarTypeName(type));
    std::vector<float> x = RandomFloats(n, 71, 4.0f), dy = RandomFloats(n, 72);
    cpu::RoundToPrecision(type, x.data(), n);
    cpu::RoundToPrecision(type, dy.data(), n);
    std::vector<uint16_t> x_bits(n), dy_bits(n);
    cpu::Narrow(type, x.data(), x_bits.data(), n);
    cpu::Narrow(type, dy.data(), dy_bits.data(), n);
    DeviceVector<float> x32(x), y32(n), dy32(dy);
    DeviceVector<uint16_t> x16(x_bits), y16(n), dy16(dy_bits);
    const ConstTensorRef cx16(x16.get(), type);
    ASSERT_EQ(ActivationForward(Activation::kGelu, x32.get(), n, y32.get(), nullptr), cudaSuccess);
    ASSERT_EQ(ActivationForward(Activation::kGelu, cx16, n, TensorRef(y16.get(), type), nullptr),
              cudaSuccess);
    ASSERT_EQ(ActivationBackward(Activation::kGelu, x32.get(), dy32.get(), n, dy32.get(), nullptr),
              cudaSuccess);
    ASSERT_EQ(ActivationBackward(Activation::kGelu, cx16, ConstTensorRef(dy16.get(), type), n,
                                 TensorRef(dy16.get(), type), nullptr),
              cudaSuccess);
    // FP32 storage rounds each output in place, the residual's sum after y's.
    ASSERT_EQ(RoundToPrecision(type, y32.get(), n, nullptr), cudaSuccess);
    ASSERT_EQ(RoundToPrecision(type, dy32.get(), n, nullptr), cudaSuccess);
    ASSERT_EQ(Accumulate(x32.get(), y32.get(), n, nullptr), cudaSuccess);
    ASSERT_EQ(RoundToPrecision(type, x32.get(), n, nullptr), cudaSuccess);
    ASSERT_EQ(Accumulate(TensorRef(x16.get(), type), ConstTensorRef(y16.get(), type), n, nullptr),
              cudaSuccess);
    for (const auto& [got16, want] :
         {std::pair<DeviceVector<uint16_t>*, DeviceVector<float>*>{&y16, &y32},
          {&dy16, &dy32},
          {&x16, &x32}}) {
      const std::vector<uint16_t> bits = got16->ToHost();
      std::vector<float> got(n);
      cpu::Widen(type, bits.data(), got.data(), n);
      EXPECT_EQ(got, want->ToHost());
    }
  }
}

TEST_F(KernelsTest, NormAccumulateAndUnscale) {
  const size_t n = 1000003;
  const std::vector<float> x = RandomFloats(n, 31);
  double want = 1.5;  // the sum adds to what the slot holds
  for (float v : x) want += static_cast<double>(v) * v;
  DeviceVector<float> dx(x);
  DeviceVector<double> partials(ReductionPartials(n)), norm(std::vector<double>{1.5});
  ASSERT_EQ(AddSquaredNorm(dx.get(), n, partials.get(), norm.get(), nullptr), cudaSuccess);
  EXPECT_NEAR(norm.ToHost()[0], want, 1e-12 * want);
  DeviceVector<float> squares(1);
  ASSERT_EQ(DoubleToFloat(norm.get(), squares.get(), 1, nullptr), cudaSuccess);
  EXPECT_EQ(squares.ToHost()[0], static_cast<float>(norm.ToHost()[0]));

  DeviceVector<float> acc(x);
  ASSERT_EQ(Accumulate(acc.get(), dx.get(), n, nullptr), cudaSuccess);
  std::vector<float> doubled = acc.ToHost();
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(doubled[i], x[i] + x[i]);

  DeviceVector<int> found(1);
  ASSERT_EQ(ScaleAndCheckFinite(acc.get(), n, 0.5f, found.get(), nullptr), cudaSuccess);
  EXPECT_EQ(found.ToHost()[0], 0);
  std::vector<float> halved = acc.ToHost();
  for (size_t i = 0; i < n; i += 997) ASSERT_EQ(halved[i], x[i]);
  std::vector<float> with_inf(x);
  with_inf[n / 2] = std::numeric_limits<float>::infinity();
  DeviceVector<float> bad(with_inf);
  ASSERT_EQ(ScaleAndCheckFinite(bad.get(), n, 0.5f, found.get(), nullptr), cudaSuccess);
  EXPECT_EQ(found.ToHost()[0], 1);
}

// The clipping kernel scales by the coefficient the CPU device computes, and leaves the
// gradient alone when the norm is under the bound; for gradients holding 16-bit values,
// with the coefficient and each product rounded to their type, as the CPU rounds them.
TEST_F(KernelsTest, ClipToNormMatchesTheCpu) {
  const size_t n = 100003;
  CpuCachingAllocator allocator;
  CpuDevice cpu(&allocator);
  for (const ScalarType values :
       {ScalarType::kFloat32, ScalarType::kBFloat16, ScalarType::kFloat16}) {
    SCOPED_TRACE(ScalarTypeName(values));
    std::vector<float> x = RandomFloats(n, 37);
    cpu.RoundToPrecision(values, x.data(), n);
    for (const double max_norm : {0.25, 1e9}) {
      const float squares = 16.0f;
      std::vector<float> want(x);
      cpu.ClipToNorm(want.data(), n, &squares, max_norm, values);
      DeviceVector<float> dx(x), dsquares(std::vector<float>{squares});
      ASSERT_EQ(ClipToNorm(dx.get(), n, dsquares.get(), max_norm, values, nullptr), cudaSuccess);
      ExpectNear(dx.ToHost(), want, 0.0f, 0.0f, "clipped gradient");
    }
  }
}

// Steps a CPU optimizer and the kernel the same way for a few steps.
TEST_F(KernelsTest, OptimizersMatchTheCpuOptimizers) {
  const size_t n = 4099;
  CpuCachingAllocator allocator;
  CpuDevice cpu(&allocator);
  for (bool adamw : {false, true}) {
    v1::OptimizerSpec spec;
    if (adamw) {
      spec.mutable_adamw()->set_lr(1e-2);
      spec.mutable_adamw()->set_weight_decay(0.1);
    } else {
      spec.mutable_sgd()->set_lr(0.05);
      spec.mutable_sgd()->set_momentum(0.9);
      spec.mutable_sgd()->set_dampening(0.1);
      spec.mutable_sgd()->set_weight_decay(0.01);
      spec.mutable_sgd()->set_nesterov(false);
    }
    auto cpu_optimizer = fsdp::Optimizer::Create(spec, 1, &cpu);
    std::vector<float> param = RandomFloats(n, 41);
    DeviceVector<float> dparam(param), state1(n), state2(n), dgrad(n);
    for (int step = 1; step <= 5; ++step) {
      const std::vector<float> grad = RandomFloats(n, 100 + step);
      cpu_optimizer->BeginStep();
      cpu_optimizer->Update(0, param.data(), grad.data(), n);
      ASSERT_EQ(cudaMemcpy(dgrad.get(), grad.data(), n * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
      if (adamw) {
        const double lr = 1e-2, beta1 = 0.9, beta2 = 0.999;
        AdamWScalars s;
        s.decay = static_cast<float>(1 - lr * 0.1);
        s.step_size = static_cast<float>(lr / (1 - std::pow(beta1, step)));
        s.bias_correction2_sqrt = static_cast<float>(std::sqrt(1 - std::pow(beta2, step)));
        ASSERT_EQ(AdamWUpdate(s, dparam.get(), dgrad.get(), state1.get(), state2.get(), n, nullptr),
                  cudaSuccess);
      } else {
        // lr, momentum, 1 - dampening (0.1, in double as the CPU's optimizer), weight decay.
        SgdScalars p{0.05f, 0.9f, static_cast<float>(1 - 0.1), 0.01f, false};
        ASSERT_EQ(SgdUpdate(p, step == 1, dparam.get(), dgrad.get(), state1.get(), n, nullptr),
                  cudaSuccess);
      }
    }
    ExpectNear(dparam.ToHost(), param, 1e-6f, 1e-7f, adamw ? "AdamW" : "SGD");
  }
}

// AdamW on many spans of one shard in tables of kMaxSpansPerTable (one launch each): the
// same bits as one launch per span, decay only where a span has it.
TEST(OptimizerKernels, AdamWSpansEqualOneLaunchPerSpan) {
  SKIP_WITHOUT_GPU();
  std::vector<UpdateSpan> spans;
  int64_t at = 0;
  for (int s = 0; s < 2 * kMaxSpansPerTable + 5; ++s) {
    const int64_t length = (s % 3 == 0) ? 1 : 37 * s + 5;
    spans.push_back({at, at + length, s % 2 == 0});
    at += length;
  }
  const auto n = static_cast<size_t>(at);
  const std::vector<float> param = RandomFloats(n, 51), grad = RandomFloats(n, 52);
  AdamWScalars s;
  s.decay = 0.99f;
  s.step_size = 0.01f;
  s.bias_correction2_sqrt = 0.05f;
  AdamWScalars undecayed = s;
  undecayed.decay = 1.0f;
  DeviceVector<float> together(param), apart(param), dgrad(grad);
  DeviceVector<float> m_together(n), v_together(n), m_apart(n), v_apart(n);
  for (const SpanTable& table : SpanTables(spans)) {
    ASSERT_EQ(AdamWUpdateSpans(s, together.get(), dgrad.get(), m_together.get(), v_together.get(),
                               table, nullptr),
              cudaSuccess);
  }
  for (const UpdateSpan& span : spans) {
    ASSERT_EQ(AdamWUpdate(span.decay ? s : undecayed, apart.get() + span.begin,
                          dgrad.get() + span.begin, m_apart.get() + span.begin,
                          v_apart.get() + span.begin, span.end - span.begin, nullptr),
              cudaSuccess);
  }
  EXPECT_EQ(together.ToHost(), apart.ToHost());
  EXPECT_EQ(m_together.ToHost(), m_apart.ToHost());
  EXPECT_EQ(v_together.ToHost(), v_apart.ToHost());
}

}  // namespace
}  // namespace shardwise::cuda
