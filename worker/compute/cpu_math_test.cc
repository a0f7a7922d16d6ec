#include "worker/compute/cpu_math.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise::cpu {
namespace {

std::vector<float> Random(size_t n, int seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

TEST(CpuMath, LinearForwardMatchesLoops) {
  const int64_t batch = 3, in = 5, out = 4;
  auto x = Random(batch * in, 1), w = Random(out * in, 2), b = Random(out, 3);
  std::vector<float> y(batch * out);
  LinearForward(x.data(), w.data(), b.data(), batch, in, out, y.data());
  for (int64_t i = 0; i < batch; ++i) {
    for (int64_t j = 0; j < out; ++j) {
      double expected = b[j];
      for (int64_t k = 0; k < in; ++k) expected += x[i * in + k] * w[j * in + k];
      EXPECT_NEAR(y[i * out + j], expected, 1e-5);
    }
  }
}

// Loss of Linear -> activation -> Linear -> cross-entropy, for finite differences.
double Loss(v1::Activation act, const std::vector<float>& x, const std::vector<float>& w1,
            const std::vector<float>& w2, const std::vector<int64_t>& labels, int64_t batch,
            int64_t in, int64_t hidden, int64_t classes) {
  std::vector<float> h(batch * hidden), a(batch * hidden), logits(batch * classes),
      grad(batch * classes);
  LinearForward(x.data(), w1.data(), nullptr, batch, in, hidden, h.data());
  ActivationForward(act, h.data(), h.size(), a.data());
  LinearForward(a.data(), w2.data(), nullptr, batch, hidden, classes, logits.data());
  return CrossEntropy(logits.data(), labels.data(), batch, classes, 1.0f, grad.data());
}

class GradientCheck : public ::testing::TestWithParam<v1::Activation> {};

TEST_P(GradientCheck, BackwardMatchesFiniteDifferences) {
  const v1::Activation act = GetParam();
  const int64_t batch = 4, in = 3, hidden = 6, classes = 3;
  auto x = Random(batch * in, 4), w1 = Random(hidden * in, 5), w2 = Random(classes * hidden, 6);
  std::vector<int64_t> labels = {0, 2, 1, 2};
  std::vector<float> h(batch * hidden), a(batch * hidden), logits(batch * classes),
      dlogits(batch * classes), da(batch * hidden), dw1(hidden * in, 0), dw2(classes * hidden, 0);
  LinearForward(x.data(), w1.data(), nullptr, batch, in, hidden, h.data());
  ActivationForward(act, h.data(), h.size(), a.data());
  LinearForward(a.data(), w2.data(), nullptr, batch, hidden, classes, logits.data());
  CrossEntropy(logits.data(), labels.data(), batch, classes, 1.0f, dlogits.data());
  LinearBackward(a.data(), w2.data(), dlogits.data(), batch, hidden, classes, da.data(),
                 dw2.data(), nullptr);
  ActivationBackward(act, h.data(), da.data(), da.size(), da.data());
  LinearBackward(x.data(), w1.data(), da.data(), batch, in, hidden, nullptr, dw1.data(), nullptr);

  // Central differences on every weight of `weights`, with the loss as a function of it.
  auto check = [&](std::vector<float>& weights, const std::vector<float>& analytic,
                   const char* name) {
    const float eps = 1e-2f;
    for (size_t i = 0; i < weights.size(); ++i) {
      const float saved = weights[i];
      weights[i] = saved + eps;
      const double plus = Loss(act, x, w1, w2, labels, batch, in, hidden, classes);
      weights[i] = saved - eps;
      const double minus = Loss(act, x, w1, w2, labels, batch, in, hidden, classes);
      weights[i] = saved;
      EXPECT_NEAR(analytic[i], (plus - minus) / (2 * eps), 2e-3) << name << "[" << i << "]";
    }
  };
  check(w1, dw1, "w1");
  check(w2, dw2, "w2");
}

INSTANTIATE_TEST_SUITE_P(Activations, GradientCheck, ::testing::Values(v1::RELU, v1::GELU));

TEST(CpuMath, GeluIsTheExactErfForm) {
  const float x[] = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
  float y[5];
  ActivationForward(v1::GELU, x, 5, y);
  // torch.nn.GELU()(torch.tensor([-2., -.5, 0., 1., 3.]))
  const float expected[] = {-0.04550026f, -0.15426877f, 0.0f, 0.8413447f, 2.9959502f};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], expected[i], 1e-6) << x[i];
}

TEST(CpuMath, LossesAreMeans) {
  const float logits[] = {0, 0, 0, 0};  // two rows, two classes: loss log 2 each
  const int64_t labels[] = {0, 1};
  float grad[4];
  EXPECT_NEAR(CrossEntropy(logits, labels, 2, 2, 1.0f, grad), std::log(2.0), 1e-6);
  EXPECT_NEAR(grad[0], -0.25f, 1e-7);  // (0.5 - 1) / 2
  EXPECT_NEAR(grad[1], 0.25f, 1e-7);
  const float pred[] = {1, 2, 3, 4}, target[] = {0, 2, 3, 6};
  float dpred[4];
  EXPECT_NEAR(MeanSquaredError(pred, target, 2, 2, 1.0f, dpred), (1.0 + 4.0) / 4, 1e-6);
  EXPECT_NEAR(dpred[0], 2 * 1.0f / 4, 1e-7);
  EXPECT_NEAR(dpred[3], 2 * -2.0f / 4, 1e-7);
}

}  // namespace
}  // namespace shardwise::cpu
