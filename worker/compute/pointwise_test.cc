// compute/pointwise.h's float activations and cross-entropy terms (what the CUDA kernels
// compute) against the exact functions in double, with glibc's erff, tanhf and expf: the
// activations within 3e-7 · max(1, |x|), the cross-entropy within its stated bounds.

#include "worker/compute/pointwise.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/testing/worst_error.h"
#include "gtest/gtest.h"

namespace shardwise::pointwise {
namespace {

struct FloatForm {
  std::string name;
  std::function<float(float)> in_float;
  std::function<double(double)> exact;
};

// The largest |in_float(x) - exact(x)| / max(1, |x|) over [-12, 12] in steps of 2^-10
// (24,577 points: the range a GPT's pre-activations take and beyond).
double WorstScaledError(const FloatForm& form) {
  double worst = 0;
  for (float x = -12.0f; x <= 12.0f; x += 0.0009765625f) {
    const double error = std::abs(form.in_float(x) - form.exact(x));
    worst = testing::WorseOf(worst, error / std::max(1.0, std::abs(static_cast<double>(x))));
  }
  return worst;
}

TEST(PointwiseFloat, ActivationsAreWithinTheirBound) {
  const FloatForm forms[] = {
      {"GeluFloat", GeluFloat, Gelu},
      {"GeluGradFloat", GeluGradFloat, GeluGrad},
      {"GeluTanhFloat", GeluTanhFloat, GeluTanh},
      {"GeluTanhGradFloat", GeluTanhGradFloat, GeluTanhGrad},
      {"SiluFloat", SiluFloat, Silu},
      {"SiluGradFloat", SiluGradFloat, SiluGrad},
  };
  for (const FloatForm& form : forms) {
    const double worst = WorstScaledError(form);
    EXPECT_LE(worst, 3e-7) << form.name;
    // Not the double form by accident: float arithmetic leaves some error.
    EXPECT_GT(worst, 0.0) << form.name;
  }
}

// Far out, where the exponentials overflow or underflow: finite limits, no NaN.
TEST(PointwiseFloat, SaturateWithoutNan) {
  for (float x : {-1e30f, -1000.0f, -100.0f, 100.0f, 1000.0f, 1e30f}) {
    for (float value : {GeluFloat(x), GeluGradFloat(x), GeluTanhFloat(x), GeluTanhGradFloat(x),
                        SiluFloat(x), SiluGradFloat(x)}) {
      EXPECT_FALSE(std::isnan(value)) << x;
    }
  }
  EXPECT_EQ(SiluGradFloat(100.0f), 1.0f);
  EXPECT_EQ(SiluGradFloat(-100.0f), 0.0f);
  EXPECT_EQ(GeluFloat(100.0f), 100.0f);
  EXPECT_EQ(GeluGradFloat(-100.0f), 0.0f);
  EXPECT_EQ(GeluTanhGradFloat(1e30f), 1.0f);
  EXPECT_EQ(GeluTanhGradFloat(-1e30f), 0.0f);
}

// One row as the CUDA kernel runs it: its loss, and its gradient into `grad`.
double KernelRow(const std::vector<float>& row, int64_t label, float grad_scale,
                 std::vector<float>& grad) {
  const float max = *std::max_element(row.begin(), row.end());
  double sum = 0;
  for (float x : row) sum += SoftmaxTerm(x, max);
  const double log_sum = LogSumExp(sum, max);
  grad.resize(row.size());
  for (size_t j = 0; j < row.size(); ++j) {
    grad[j] = CrossEntropyGradient(row[j], log_sum, static_cast<int64_t>(j) == label, grad_scale);
  }
  return log_sum - row[label];
}

// Rows of GPT-2's vocabulary and of a few classes, logits spread from 1 to 16 standard
// deviations: the loss and every gradient term within LogSumExpError and
// ProbabilityError of the formula in double, and some error left (float, not double).
TEST(PointwiseFloat, CrossEntropyIsWithinItsBound) {
  std::mt19937 rng(7);
  const float grad_scale = 1.0f / 3;
  double worst_loss_share = 0, worst_grad_share = 0;
  for (const int64_t classes : {37, 50257}) {
    for (const float deviation : {1.0f, 4.0f, 16.0f}) {
      std::normal_distribution<float> normal(0.0f, deviation);
      std::vector<float> row(classes), grad;
      for (float& x : row) x = normal(rng);
      const int64_t label = classes / 3;
      const double got_loss = KernelRow(row, label, grad_scale, grad);

      const float max = *std::max_element(row.begin(), row.end());
      const float min = *std::min_element(row.begin(), row.end());
      const double spread = static_cast<double>(max) - min;
      double sum = 0;
      for (float x : row) sum += std::exp(static_cast<double>(x) - max);
      const double log_sum = std::log(sum) + max;
      const double loss_bound = LogSumExpError(spread) + 1e-12;  // + the double sum's order
      EXPECT_NEAR(got_loss, log_sum - row[label], loss_bound) << classes << " " << deviation;
      worst_loss_share = testing::WorseOf(worst_loss_share,
                                          std::abs(got_loss - (log_sum - row[label])) / loss_bound);
      for (int64_t j = 0; j < classes; ++j) {
        const double p = std::exp(static_cast<double>(row[j]) - log_sum);
        const double want = (j == label ? p - 1 : p) * grad_scale;
        const double bound =
            CrossEntropyGradientError(p, want, grad_scale, spread, static_cast<double>(classes));
        const double error = std::abs(grad[j] - want);
        ASSERT_LE(error, bound) << classes << " " << deviation << " [" << j << "]";
        worst_grad_share = testing::WorseOf(worst_grad_share, error / bound);
      }
    }
  }
  EXPECT_GT(worst_loss_share, 0.0);
  EXPECT_GT(worst_grad_share, 0.0);
  std::printf("worst share of the bound: loss %.3f, gradient %.3f\n", worst_loss_share,
              worst_grad_share);
}

// AdamW's first moment is torch's lerp_: from the nearer end, so beta1 = 0 (a weight of
// 1) makes it the gradient exactly, where m + 1 * (g - m) would lose a small g to m.
TEST(Pointwise, AdamWsFirstMomentIsTorchsLerp) {
  AdamWScalars s;
  s.one_minus_beta1 = 1.0f;
  float p = 1.0f, m = 3.0f, v = 0.0f;
  AdamWStep(s, &p, 1e-8f, &m, &v);
  EXPECT_EQ(m, 1e-8f);
  EXPECT_EQ(Lerp(3.0f, 1e-8f, 0.1f), 3.0f + 0.1f * (1e-8f - 3.0f));  // below 0.5: from start
  EXPECT_EQ(Lerp(3.0f, 1e-8f, 0.7f), 1e-8f - (1e-8f - 3.0f) * (1.0f - 0.7f));
}

// The unscale checks its input, as torch's: a finite gradient carried to inf by an
// inverse scale above 1 does not count as found (torch steps with it); inf and NaN do.
TEST(Pointwise, TheUnscaleChecksItsInputNotItsProduct) {
  float x = 3e38f;
  EXPECT_FALSE(UnscaleAndCheckNonFinite(&x, 2.0f));
  EXPECT_EQ(x, std::numeric_limits<float>::infinity());
  x = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(UnscaleAndCheckNonFinite(&x, 0.5f));
  x = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(UnscaleAndCheckNonFinite(&x, 0.5f));
  x = 6.0f;
  EXPECT_FALSE(UnscaleAndCheckNonFinite(&x, 0.5f));
  EXPECT_EQ(x, 3.0f);
}

}  // namespace
}  // namespace shardwise::pointwise
