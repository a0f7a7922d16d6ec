// The CPU layers against plain loops and against values PyTorch prints.

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/embedding.h"
#include "worker/compute/cpu/layer_norm.h"
#include "worker/compute/cpu/linear.h"
#include "worker/compute/cpu/losses.h"
#include "worker/compute/cpu/test_values.h"

namespace shardwise::cpu {
namespace {

TEST(Linear, ForwardMatchesLoops) {
  const int64_t batch = 3, in = 5, out = 4;
  auto x = RandomValues(batch * in, 1), w = RandomValues(out * in, 2), b = RandomValues(out, 3);
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

TEST(Activation, GeluIsTheExactErfFormAndGeluTanhItsApproximation) {
  const float x[] = {-2.0f, -0.5f, 0.0f, 1.0f, 3.0f};
  float y[5], y_tanh[5];
  ActivationForward(v1::GELU, x, 5, y);
  ActivationForward(v1::GELU_TANH, x, 5, y_tanh);
  // torch.nn.GELU()(torch.tensor([-2., -.5, 0., 1., 3.])), and the tanh formula's values.
  const float expected[] = {-0.04550026f, -0.15426877f, 0.0f, 0.8413447f, 2.9959502f};
  const float expected_tanh[] = {-0.04540231f, -0.15428599f, 0.0f, 0.84119199f, 2.99636261f};
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(y[i], expected[i], 1e-6) << x[i];
    EXPECT_NEAR(y_tanh[i], expected_tanh[i], 1e-6) << x[i];
  }
}

TEST(Losses, AreMeans) {
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

// Training's float cross-entropy (exponentials in float, vectorised) against the double
// form (libm's), on logits spread over +-16 across a vocabulary's width: the loss within
// 1e-6 relative, each gradient within float roundings of the double one.
TEST(Losses, TheFloatCrossEntropyMatchesTheDoubleOneToFloatRounding) {
  const int64_t rows = 6, classes = 1003;
  std::vector<float> logits = RandomValues(rows * classes, 21);
  for (float& v : logits) v *= 16;
  const int64_t labels[] = {0, 1002, 17, 500, 3, 999};
  std::vector<float> grad(rows * classes);
  const double loss = CrossEntropy(logits.data(), labels, rows, classes, 2.0f, grad.data());
  const std::vector<double> wide(logits.begin(), logits.end());
  std::vector<double> want(rows * classes);
  const double want_loss = CrossEntropy(wide.data(), labels, rows, classes, 2.0, want.data());
  EXPECT_NEAR(loss, want_loss, 1e-6 * want_loss);
  const double grad_scale = 2.0 / rows;
  for (size_t i = 0; i < grad.size(); ++i) {
    ASSERT_NEAR(grad[i], want[i], 5e-7 * (std::abs(want[i]) + grad_scale)) << i;
  }
}

// The model writes each loss's gradient over its input (model/loss.cc): in place, the same
// loss and the same gradient bits as into a buffer of its own, in float and in double.
template <typename T>
void ExpectLossesInPlaceAsApart() {
  const int64_t rows = 6, classes = 1003;
  const std::vector<float> random = RandomValues(rows * classes, 23);
  std::vector<T> logits(random.begin(), random.end());
  for (T& v : logits) v *= 16;
  const int64_t labels[] = {0, 1002, 17, 500, 3, 999};
  std::vector<T> apart(logits.size()), in_place = logits;
  const double loss = CrossEntropy(logits.data(), labels, rows, classes, T{2}, apart.data());
  EXPECT_EQ(CrossEntropy(in_place.data(), labels, rows, classes, T{2}, in_place.data()), loss);
  EXPECT_EQ(in_place, apart);
  const std::vector<T> target(logits.rbegin(), logits.rend());
  std::vector<T> dpred(logits.size()), pred = logits;
  const double mse =
      MeanSquaredError(logits.data(), target.data(), rows, classes, T{2}, dpred.data());
  EXPECT_EQ(MeanSquaredError(pred.data(), target.data(), rows, classes, T{2}, pred.data()), mse);
  EXPECT_EQ(pred, dpred);
}

TEST(Losses, WriteTheirGradientOverTheirInputAsIntoABufferOfItsOwn) {
  ExpectLossesInPlaceAsApart<float>();
  ExpectLossesInPlaceAsApart<double>();
}

// A label outside [0, classes) (which the loaders refuse first) makes the loss NaN instead
// of reading outside its row.
TEST(Losses, ALabelOutsideTheClassesGivesNaN) {
  const float logits[] = {0, 0, 0, 0};
  float grad[4];
  for (const int64_t bad : {int64_t{2}, int64_t{-1}, int64_t{1} << 40}) {
    const int64_t labels[] = {0, bad};
    EXPECT_TRUE(std::isnan(CrossEntropy(logits, labels, 2, 2, 1.0f, grad))) << bad;
  }
}

TEST(LayerNorm, NormalisesEachRowThenScalesAndShifts) {
  // (x - mean) / sqrt(var + 1e-5) * w + b for x = [1, 2, 4], w = [1, 2, .5], b = [0, 1, -1].
  const float x[] = {1, 2, 4}, w[] = {1, 2, 0.5f}, b[] = {0, 1, -1};
  float y[3], mean, rstd;
  LayerNormForward(x, w, b, 1, 3, 1e-5f, y, &mean, &rstd);
  EXPECT_NEAR(mean, 7.0f / 3, 1e-6);
  EXPECT_NEAR(y[0], -1.0690415f, 1e-6);
  EXPECT_NEAR(y[1], 0.4654792f, 1e-6);
  EXPECT_NEAR(y[2], -0.3318490f, 1e-6);
}

TEST(Embedding, LooksUpRowsAndAddsGradientsInOrder) {
  const float table[] = {0, 1, 10, 11, 20, 21};  // 3 rows of 2
  const int64_t ids[] = {2, 0, 2};
  float out[6];
  EmbeddingForward(table, ids, 3, 2, out);
  EXPECT_EQ(std::vector<float>(out, out + 6), (std::vector<float>{20, 21, 0, 1, 20, 21}));
  float dtable[6] = {};
  const float dout[] = {1, 2, 3, 4, 5, 6};
  EmbeddingBackward(ids, dout, 3, 2, dtable);
  EXPECT_EQ(std::vector<float>(dtable, dtable + 6), (std::vector<float>{3, 4, 0, 0, 6, 8}));
}

// Attention against the formula written out with loops, in double.
void CheckAttentionForward(int64_t seq) {
  const int64_t batch = 2, heads = 2, head_dim = 3, width = heads * head_dim;
  const std::vector<float> qkv = RandomValues(batch * seq * 3 * width, 7);
  std::vector<float> out(batch * seq * width), probs(batch * heads * seq * seq);
  AttentionForward(qkv.data(), batch, seq, heads, head_dim, out.data(), probs.data());
  auto at = [&](int64_t b, int64_t t, int part, int64_t h, int64_t d) {
    return static_cast<double>(qkv[(b * seq + t) * 3 * width + part * width + h * head_dim + d]);
  };
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < seq; ++i) {
        std::vector<double> p(i + 1);
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t d = 0; d < head_dim; ++d) p[j] += at(b, i, 0, h, d) * at(b, j, 1, h, d);
          p[j] /= std::sqrt(static_cast<double>(head_dim));
          max = std::max(max, p[j]);
        }
        for (double& v : p) sum += (v = std::exp(v - max));
        for (int64_t j = 0; j < seq; ++j) {
          const double want = j <= i ? p[j] / sum : 0.0;
          EXPECT_NEAR(probs[((b * heads + h) * seq + i) * seq + j], want, 1e-6);
        }
        for (int64_t d = 0; d < head_dim; ++d) {
          double want = 0;
          for (int64_t j = 0; j <= i; ++j) want += p[j] / sum * at(b, j, 2, h, d);
          EXPECT_NEAR(out[(b * seq + i) * width + h * head_dim + d], want, 1e-5);
        }
      }
    }
  }
}

TEST(Attention, ForwardMatchesTheFormulaAndIsCausal) { CheckAttentionForward(5); }

// Across attention.cc's blocks of 64 rows, a partial last one included.
TEST(Attention, ForwardMatchesTheFormulaAcrossBlocks) { CheckAttentionForward(2 * 64 + 7); }

}  // namespace
}  // namespace shardwise::cpu
