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
  const int64_t rows = l.batch * l.seq, width = l.heads * l.head_dim;
  const int64_t group = l.heads / l.kv_heads;
  const std::vector<double> qkv = PackedQkv(l, values);
  AttentionResults r;
  r.out.resize(rows * width);
  r.stats.resize(l.batch * l.heads * l.seq);
  r.dots.resize(r.stats.size());
  cpu::FusedAttentionForward(qkv.data(), shape, r.out.data(), r.stats.data());
  std::vector<double> dqkv(qkv.size());
  cpu::FusedAttentionBackward(qkv.data(), r.out.data(), r.stats.data(), values.dout.data(), shape,
                              r.dots.data(), dqkv.data());
  r.dq.resize(rows * width);
  r.dk.assign(rows * l.kv_heads * l.head_dim, 0.0);
  r.dv.assign(r.dk.size(), 0.0);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t h = 0; h < l.heads; ++h) {
      for (int64_t d = 0; d < l.head_dim; ++d) {
        const double* at = &dqkv[row * 3 * width + h * l.head_dim + d];
        const int64_t kv = (row * l.kv_heads + h / group) * l.head_dim + d;
        r.dq[(row * l.heads + h) * l.head_dim + d] = at[0];
        r.dk[kv] += at[width];
        r.dv[kv] += at[2 * width];
      }
    }
  }
  return r;
}

}  // namespace shardwise::cuda::testing
