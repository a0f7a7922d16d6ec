// compute/float_math.h against the exact functions (libm in double), over the range a
// GPT's pre-activations take and beyond.

#include "worker/compute/float_math.h"

#include <cmath>
#include <limits>

#include "common/testing/worst_error.h"
#include "gtest/gtest.h"
#include "worker/compute/pointwise.h"

namespace shardwise::float_math {
namespace {

// The distance in units in the last place of `expected` (rounded to float).
double Ulps(float value, double expected) {
  const float rounded = static_cast<float>(expected);
  const float next = std::nextafter(rounded, std::numeric_limits<float>::infinity());
  return std::abs(value - expected) / (next - rounded);
}

TEST(FloatMath, ExpIsWithinTwoUlps) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.0f; x += 0.001953125f) {  // 2^-9 steps: 89,600 points
    worst = testing::WorseOf(worst, Ulps(ExpF(x), std::exp(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(ExpF(0.0f), 1.0f);
  EXPECT_GT(ExpF(-1000.0f), 0.0f);  // clamped: tiny, not zero, not a denormal
  EXPECT_LT(ExpF(-1000.0f), 2e-38f);
}

TEST(FloatMath, ErfIsWithinItsApproximationsBound) {
  double worst = 0;
  for (float x = -6.0f; x <= 6.0f; x += 0.0009765625f) {
    worst = testing::WorseOf(worst, std::abs(ErfF(x) - std::erf(static_cast<double>(x))));
  }
  EXPECT_LE(worst, 4e-7);  // 1.5e-7 for the formula, plus float rounding
  EXPECT_EQ(ErfF(0.0f), 0.0f);
  EXPECT_EQ(ErfF(-0.5f), -ErfF(0.5f));
}

TEST(FloatMath, GeluAndItsGradientAreCloseToTheExactOnes) {
  double worst_gelu = 0, worst_grad = 0;
  for (float x = -10.0f; x <= 10.0f; x += 0.0009765625f) {
    const double scale = std::max(1.0, std::abs(static_cast<double>(x)));
    worst_gelu = testing::WorseOf(worst_gelu, std::abs(GeluF(x) - pointwise::Gelu(x)) / scale);
    worst_grad =
        testing::WorseOf(worst_grad, std::abs(GeluGradF(x) - pointwise::GeluGrad(x)) / scale);
  }
  EXPECT_LE(worst_gelu, 2e-7);
  EXPECT_LE(worst_grad, 3e-7);
  EXPECT_EQ(GeluF(0.0f), 0.0f);
  EXPECT_EQ(GeluF(-20.0f), -0.0f);
}

// SiLU within 4 ulp relative; its gradient (in [-0.1, 1.1], crossing 0 at -1.28) within
// 4 ulp of 1, absolute.
TEST(FloatMath, SiluAndItsGradientAreWithinFourUlpsOfTheExactOnes) {
  double worst_silu = 0, worst_grad = 0;
  for (float x = -80.0f; x <= 80.0f; x += 0.0009765625f) {
    const double silu = pointwise::Silu(x), grad = pointwise::SiluGrad(x);
    if (std::abs(silu) > 1e-30)
      worst_silu = testing::WorseOf(worst_silu, std::abs(SiluF(x) - silu) / std::abs(silu));
    worst_grad = testing::WorseOf(worst_grad, std::abs(SiluGradF(x) - grad));  // it crosses 0
  }
  EXPECT_LE(worst_silu, 4 * 6e-8);
  EXPECT_LE(worst_grad, 4 * 6e-8);
  EXPECT_EQ(SiluF(0.0f), 0.0f);
  EXPECT_EQ(SiluF(100.0f), 100.0f);
}

}  // namespace
}  // namespace shardwise::float_math
