// Every layer's backward against central finite differences of its forward, in float64
// (the layers are templates: this is the code training runs, instantiated for double).
// Each check sums the layer's output against fixed random weights R, so the gradient of
// that sum is the backward given dout = R. A pre-LayerNorm transformer block composed of
// the layers checks the residual paths the GPT's blocks take.

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/attention.h"
#include "worker/compute/cpu/embedding.h"
#include "worker/compute/cpu/fused_attention.h"
#include "worker/compute/cpu/layer_norm.h"
#include "worker/compute/cpu/linear.h"
#include "worker/compute/cpu/llama_layers.h"
#include "worker/compute/cpu/losses.h"
#include "worker/compute/cpu/test_values.h"

namespace shardwise::cpu {
namespace {

using Vec = std::vector<double>;

Vec Random(size_t n, int seed, double scale = 1.0) { return RandomValues<double>(n, seed, scale); }

double Dot(const Vec& a, const Vec& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Central differences of `loss` in every element of `values`, against `analytic`.
void ExpectGradient(const std::string& name, Vec& values, const Vec& analytic,
                    const std::function<double()>& loss) {
  ASSERT_EQ(values.size(), analytic.size()) << name;
  const double eps = 1e-5;
  for (size_t i = 0; i < values.size(); ++i) {
    const double saved = values[i];
    values[i] = saved + eps;
    const double plus = loss();
    values[i] = saved - eps;
    const double minus = loss();
    values[i] = saved;
    const double numeric = (plus - minus) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 1e-7 * std::max(1.0, std::abs(numeric)))
        << name << "[" << i << "]";
  }
}

TEST(GradientCheck, Linear) {
  const int64_t batch = 3, in = 4, out = 5;
  Vec x = Random(batch * in, 1), w = Random(out * in, 2), b = Random(out, 3);
  const Vec r = Random(batch * out, 4);
  auto loss = [&] {
    Vec y(batch * out);
    LinearForward(x.data(), w.data(), b.data(), batch, in, out, y.data());
    return Dot(y, r);
  };
  Vec dx(batch * in), dw(out * in, 0.0), db(out, 0.0);
  LinearBackward(x.data(), w.data(), r.data(), batch, in, out, dx.data(), dw.data(), db.data());
  ExpectGradient("x", x, dx, loss);
  ExpectGradient("w", w, dw, loss);
  ExpectGradient("b", b, db, loss);
}

class ActivationCheck : public ::testing::TestWithParam<v1::Activation> {};

TEST_P(ActivationCheck, MatchesFiniteDifferences) {
  // Away from ReLU's kink at 0.
  Vec x = {-2.1, -0.7, -0.2, 0.3, 0.9, 1.7, 3.2};
  const Vec r = Random(x.size(), 5);
  auto loss = [&] {
    Vec y(x.size());
    ActivationForward(GetParam(), x.data(), x.size(), y.data());
    return Dot(y, r);
  };
  Vec dx(x.size());
  ActivationBackward(GetParam(), x.data(), r.data(), x.size(), dx.data());
  ExpectGradient("x", x, dx, loss);
}

INSTANTIATE_TEST_SUITE_P(Every, ActivationCheck,
                         ::testing::Values(v1::RELU, v1::GELU, v1::GELU_TANH, v1::SILU),
                         [](const auto& info) { return v1::Activation_Name(info.param); });

TEST(GradientCheck, LayerNorm) {
  const int64_t rows = 3, dim = 6;
  Vec x = Random(rows * dim, 6, 2.0), w = Random(dim, 7), b = Random(dim, 8);
  const Vec r = Random(rows * dim, 9);
  auto loss = [&] {
    Vec y(rows * dim), mean(rows), rstd(rows);
    LayerNormForward(x.data(), w.data(), b.data(), rows, dim, 1e-5, y.data(), mean.data(),
                     rstd.data());
    return Dot(y, r);
  };
  Vec y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dw(dim, 0.0), db(dim, 0.0);
  LayerNormForward(x.data(), w.data(), b.data(), rows, dim, 1e-5, y.data(), mean.data(),
                   rstd.data());
  LayerNormBackward(x.data(), w.data(), mean.data(), rstd.data(), r.data(), rows, dim, dx.data(),
                    dw.data(), db.data());
  ExpectGradient("x", x, dx, loss);
  ExpectGradient("w", w, dw, loss);
  ExpectGradient("b", b, db, loss);
}

TEST(GradientCheck, RmsNorm) {
  const int64_t rows = 3, dim = 6;
  Vec x = Random(rows * dim, 16, 2.0), w = Random(dim, 17);
  const Vec r = Random(rows * dim, 18);
  auto loss = [&] {
    Vec y(rows * dim), rstd(rows);
    RmsNormForward(x.data(), w.data(), rows, dim, 1e-6, y.data(), rstd.data());
    return Dot(y, r);
  };
  Vec y(rows * dim), rstd(rows), dx(rows * dim), dw(dim, 0.0);
  RmsNormForward(x.data(), w.data(), rows, dim, 1e-6, y.data(), rstd.data());
  RmsNormBackward(x.data(), w.data(), rstd.data(), r.data(), rows, dim, dx.data(), dw.data());
  ExpectGradient("x", x, dx, loss);
  ExpectGradient("w", w, dw, loss);
}

// Rotary embeddings then grouped-query packing, as the Llama's attention runs them on q and
// k: the backward (unpack, then the inverse rotation) is their transpose.
TEST(GradientCheck, RotaryAndGroupedQkvPacking) {
  const int64_t rows = 6, seq = 3, heads = 4, kv_heads = 2, head_dim = 4, half = head_dim / 2;
  Vec q = Random(rows * heads * head_dim, 19), k = Random(rows * kv_heads * head_dim, 20);
  Vec v = Random(rows * kv_heads * head_dim, 21);
  const Vec cos = Random(seq * half, 22), sin = Random(seq * half, 23);
  const Vec r = Random(rows * 3 * heads * head_dim, 24);
  auto loss = [&] {
    Vec rq = q, rk = k, qkv(r.size());
    Rotary(rq.data(), cos.data(), sin.data(), rows, seq, heads, head_dim, false);
    Rotary(rk.data(), cos.data(), sin.data(), rows, seq, kv_heads, head_dim, false);
    PackGroupedQkv(rq.data(), rk.data(), v.data(), rows, heads, kv_heads, head_dim, qkv.data());
    return Dot(qkv, r);
  };
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  UnpackGroupedQkvGrad(r.data(), rows, heads, kv_heads, head_dim, dq.data(), dk.data(), dv.data());
  Rotary(dq.data(), cos.data(), sin.data(), rows, seq, heads, head_dim, true);
  Rotary(dk.data(), cos.data(), sin.data(), rows, seq, kv_heads, head_dim, true);
  ExpectGradient("q", q, dq, loss);
  ExpectGradient("k", k, dk, loss);
  ExpectGradient("v", v, dv, loss);
}

TEST(GradientCheck, Embedding) {
  const int64_t vocab = 5, dim = 3;
  const std::vector<int64_t> ids = {4, 1, 4, 0, 2, 4};
  const int64_t n = static_cast<int64_t>(ids.size());
  Vec table = Random(vocab * dim, 10);
  const Vec r = Random(n * dim, 11);
  auto loss = [&] {
    Vec out(n * dim);
    EmbeddingForward(table.data(), ids.data(), n, dim, out.data());
    return Dot(out, r);
  };
  Vec dtable(vocab * dim, 0.0);
  EmbeddingBackward(ids.data(), r.data(), n, dim, dtable.data());
  ExpectGradient("table", table, dtable, loss);
}

void CheckCausalAttention(int64_t batch, int64_t seq) {
  const int64_t heads = 2, head_dim = 3, width = heads * head_dim;
  Vec qkv = Random(batch * seq * 3 * width, 12);
  const Vec r = Random(batch * seq * width, 13);
  auto loss = [&] {
    Vec out(batch * seq * width), probs(batch * heads * seq * seq);
    AttentionForward(qkv.data(), batch, seq, heads, head_dim, out.data(), probs.data());
    return Dot(out, r);
  };
  Vec out(batch * seq * width), probs(batch * heads * seq * seq), dqkv(qkv.size());
  AttentionForward(qkv.data(), batch, seq, heads, head_dim, out.data(), probs.data());
  AttentionBackward(qkv.data(), probs.data(), r.data(), batch, seq, heads, head_dim, dqkv.data());
  ExpectGradient("qkv", qkv, dqkv, loss);
}

TEST(GradientCheck, CausalAttention) { CheckCausalAttention(2, 4); }

// Across attention.cc's blocks of 64 rows, a partial last one included.
TEST(GradientCheck, CausalAttentionAcrossBlocks) { CheckCausalAttention(1, 2 * 64 + 7); }

// Long enough for the online softmax to cross key tiles (fused_attention_rows.h).
TEST(GradientCheck, FusedCausalAttention) {
  const AttentionShape shape{2, 19, 2, 3};
  Vec qkv = Random(shape.batch * shape.seq * 3 * shape.width(), 17);
  const Vec r = Random(shape.batch * shape.seq * shape.width(), 18);
  Vec out(r.size()), lse(shape.batch * shape.heads * shape.seq), dots(lse.size()), dqkv(qkv.size());
  auto loss = [&] {
    FusedAttentionForward(PackedQkvSpan<const double*>(qkv.data(), shape), shape, out.data(),
                          lse.data());
    return Dot(out, r);
  };
  loss();
  FusedAttentionBackward(PackedQkvSpan<const double*>(qkv.data(), shape), out.data(), lse.data(),
                         r.data(), shape, dots.data(), PackedQkvSpan(dqkv.data(), shape));
  ExpectGradient("qkv", qkv, dqkv, loss);
}

TEST(GradientCheck, CrossEntropyAndMeanSquaredError) {
  const int64_t rows = 4, classes = 5;
  Vec logits = Random(rows * classes, 14, 3.0);
  const std::vector<int64_t> labels = {0, 4, 2, 2};
  Vec dlogits(logits.size());
  CrossEntropy(logits.data(), labels.data(), rows, classes, 0.5, dlogits.data());
  ExpectGradient("logits", logits, dlogits, [&] {
    Vec unused(logits.size());
    return CrossEntropy(logits.data(), labels.data(), rows, classes, 0.5, unused.data());
  });
  Vec pred = Random(rows * classes, 15);
  const Vec target = Random(rows * classes, 16);
  Vec dpred(pred.size());
  MeanSquaredError(pred.data(), target.data(), rows, classes, 1.0, dpred.data());
  ExpectGradient("pred", pred, dpred, [&] {
    Vec unused(pred.size());
    return MeanSquaredError(pred.data(), target.data(), rows, classes, 1.0, unused.data());
  });
}

// nanoGPT's Block: x + attn(ln_1(x)), then + mlp(ln_2(.)), composed of the layers above
// with the residual gradients summed as worker/model's block does.
struct Block {
  int64_t batch = 2, seq = 3, heads = 2, head_dim = 2;
  int64_t c() const { return heads * head_dim; }
  int64_t rows() const { return batch * seq; }
  Vec ln1_w = Random(c(), 20), ln1_b = Random(c(), 21), attn_w = Random(3 * c() * c(), 22),
      attn_b = Random(3 * c(), 23), proj_w = Random(c() * c(), 24), proj_b = Random(c(), 25),
      ln2_w = Random(c(), 26), ln2_b = Random(c(), 27), fc_w = Random(4 * c() * c(), 28),
      fc_b = Random(4 * c(), 29), out_w = Random(c() * 4 * c(), 30), out_b = Random(c(), 31);

  struct Saved {
    Vec x, ln1, mean1, rstd1, qkv, att, probs, x2, ln2, mean2, rstd2, h, g;
  };

  Vec Forward(const Vec& x, Saved* s) {
    const int64_t n = rows(), w = c();
    s->x = x;
    s->ln1.resize(n * w), s->mean1.resize(n), s->rstd1.resize(n);
    LayerNormForward(x.data(), ln1_w.data(), ln1_b.data(), n, w, 1e-5, s->ln1.data(),
                     s->mean1.data(), s->rstd1.data());
    s->qkv.resize(n * 3 * w);
    LinearForward(s->ln1.data(), attn_w.data(), attn_b.data(), n, w, 3 * w, s->qkv.data());
    s->att.resize(n * w), s->probs.resize(batch * heads * seq * seq);
    AttentionForward(s->qkv.data(), batch, seq, heads, head_dim, s->att.data(), s->probs.data());
    Vec y(n * w);
    LinearForward(s->att.data(), proj_w.data(), proj_b.data(), n, w, w, y.data());
    s->x2 = x;
    for (int64_t i = 0; i < n * w; ++i) s->x2[i] += y[i];
    s->ln2.resize(n * w), s->mean2.resize(n), s->rstd2.resize(n);
    LayerNormForward(s->x2.data(), ln2_w.data(), ln2_b.data(), n, w, 1e-5, s->ln2.data(),
                     s->mean2.data(), s->rstd2.data());
    s->h.resize(n * 4 * w), s->g.resize(n * 4 * w);
    LinearForward(s->ln2.data(), fc_w.data(), fc_b.data(), n, w, 4 * w, s->h.data());
    ActivationForward(v1::GELU, s->h.data(), s->h.size(), s->g.data());
    Vec m(n * w);
    LinearForward(s->g.data(), out_w.data(), out_b.data(), n, 4 * w, w, m.data());
    Vec out = s->x2;
    for (int64_t i = 0; i < n * w; ++i) out[i] += m[i];
    return out;
  }

  // Gradients of sum(out * dout) into `grads` (the parameters' in declaration order) and
  // the returned input gradient.
  Vec Backward(const Saved& s, const Vec& dout, std::vector<Vec>* grads) {
    const int64_t n = rows(), w = c();
    for (Vec* p : Parameters()) grads->push_back(Vec(p->size(), 0.0));
    auto& g = *grads;
    // out = x2 + mlp(ln2(x2)): the residual passes dout through, the MLP adds to it.
    Vec dg(n * 4 * w), dln2(n * w), dx2 = dout;
    LinearBackward(s.g.data(), out_w.data(), dout.data(), n, 4 * w, w, dg.data(), g[10].data(),
                   g[11].data());
    ActivationBackward(v1::GELU, s.h.data(), dg.data(), dg.size(), dg.data());
    LinearBackward(s.ln2.data(), fc_w.data(), dg.data(), n, w, 4 * w, dln2.data(), g[8].data(),
                   g[9].data());
    Vec dnorm(n * w);
    LayerNormBackward(s.x2.data(), ln2_w.data(), s.mean2.data(), s.rstd2.data(), dln2.data(), n, w,
                      dnorm.data(), g[6].data(), g[7].data());
    for (int64_t i = 0; i < n * w; ++i) dx2[i] += dnorm[i];
    // x2 = x + attn(ln1(x)).
    Vec datt(n * w), dqkv(n * 3 * w), dln1(n * w), dx = dx2;
    LinearBackward(s.att.data(), proj_w.data(), dx2.data(), n, w, w, datt.data(), g[4].data(),
                   g[5].data());
    AttentionBackward(s.qkv.data(), s.probs.data(), datt.data(), batch, seq, heads, head_dim,
                      dqkv.data());
    LinearBackward(s.ln1.data(), attn_w.data(), dqkv.data(), n, w, 3 * w, dln1.data(), g[2].data(),
                   g[3].data());
    LayerNormBackward(s.x.data(), ln1_w.data(), s.mean1.data(), s.rstd1.data(), dln1.data(), n, w,
                      dnorm.data(), g[0].data(), g[1].data());
    for (int64_t i = 0; i < n * w; ++i) dx[i] += dnorm[i];
    return dx;
  }

  std::vector<Vec*> Parameters() {
    return {&ln1_w, &ln1_b, &attn_w, &attn_b, &proj_w, &proj_b,
            &ln2_w, &ln2_b, &fc_w,   &fc_b,   &out_w,  &out_b};
  }
};

TEST(GradientCheck, PreLayerNormTransformerBlock) {
  Block block;
  Vec x = Random(block.rows() * block.c(), 32);
  const Vec r = Random(x.size(), 33);
  auto loss = [&] {
    Block::Saved unused;
    return Dot(block.Forward(x, &unused), r);
  };
  Block::Saved saved;
  block.Forward(x, &saved);
  std::vector<Vec> grads;
  const Vec dx = block.Backward(saved, r, &grads);
  ExpectGradient("x", x, dx, loss);
  std::vector<Vec*> params = block.Parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ExpectGradient("param " + std::to_string(i), *params[i], grads[i], loss);
  }
}

}  // namespace
}  // namespace shardwise::cpu
