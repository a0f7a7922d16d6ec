#include "worker/cuda/attention_reference.h"

#include <random>

#include "worker/compute/cpu/fused_attention.h"

namespace shardwise::cuda::testing {
namespace {

std::vector<double> RandomValues(size_t n, std::mt19937& generator) {
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(n);
  for (double& value : values) value = uniform(generator);
  return values;
}

}  // namespace

AttentionValues RandomAttentionValues(const AttentionLayout& l, unsigned seed) {
  std::mt19937 generator(seed);
  const auto rows = static_cast<size_t>(l.batch * l.seq);
  const auto width = static_cast<size_t>(l.heads * l.head_dim);
  const auto kv_width = static_cast<size_t>(l.kv_heads * l.head_dim);
  AttentionValues values;
  values.q = RandomValues(rows * width, generator);
  values.k = RandomValues(rows * kv_width, generator);
  values.v = RandomValues(rows * kv_width, generator);
  values.dout = RandomValues(rows * width, generator);
  return values;
}

std::vector<double> PackedQkv(const AttentionLayout& l, const AttentionValues& values) {
  const int64_t width = l.heads * l.head_dim, group = l.heads / l.kv_heads;
  std::vector<double> qkv(l.batch * l.seq * 3 * width);
  for (int64_t row = 0; row < l.batch * l.seq; ++row) {
    for (int64_t h = 0; h < l.heads; ++h) {
      for (int64_t d = 0; d < l.head_dim; ++d) {
        const int64_t kv = (row * l.kv_heads + h / group) * l.head_dim + d;
        double* at = &qkv[row * 3 * width + h * l.head_dim + d];
        at[0] = values.q[(row * l.heads + h) * l.head_dim + d];
        at[width] = values.k[kv];
        at[2 * width] = values.v[kv];
      }
    }
  }
  return qkv;
}

AttentionResults ReferenceAttention(const AttentionLayout& l, const AttentionValues& values) {
  const AttentionShape shape{l.batch, l.seq, l.heads, l.head_dim};
  const int64_t rows = l.batch * l.seq;
  AttentionResults r;
  r.out.resize(rows * shape.width());
  r.stats.resize(l.batch * l.heads * l.seq);
  r.dots.resize(r.stats.size());
  r.dq.resize(values.q.size());
  r.dk.resize(values.k.size());
  r.dv.resize(values.v.size());
  const QkvSpan<const double*> qkv =
      SeparateQkvSpan(values.q.data(), values.k.data(), values.v.data(), shape, l.kv_heads);
  cpu::FusedAttentionForward(qkv, shape, r.out.data(), r.stats.data());
  cpu::FusedAttentionBackward(
      qkv, r.out.data(), r.stats.data(), values.dout.data(), shape, r.dots.data(),
      SeparateQkvSpan(r.dq.data(), r.dk.data(), r.dv.data(), shape, l.kv_heads));
  return r;
}

}  // namespace shardwise::cuda::testing
