// compute/pointwise.h's float activations (what the CUDA kernels compute) against the
// exact functions in double, with glibc's erff, tanhf and expf: within 3e-7 · max(1, |x|).

#include "worker/compute/pointwise.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

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
    worst = std::max(worst, error / std::max(1.0, std::abs(static_cast<double>(x))));
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

}  // namespace
}  // namespace shardwise::pointwise
