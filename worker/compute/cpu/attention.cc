#include "worker/compute/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "worker/compute/attention_shape.h"
#include "worker/compute/cpu/gemm.h"
#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/float_math.h"

namespace shardwise::cpu {
namespace {

// Where head h of sequence b starts in qkv (part 0: q, 1: k, 2: v) and in out.
struct HeadView {
  int64_t seq, heads, head_dim;
  int64_t width() const { return heads * head_dim; }
  int64_t qkv_offset(int64_t b, int64_t h, int part) const {
    return b * seq * 3 * width() + part * width() + h * head_dim;
  }
  int64_t out_offset(int64_t b, int64_t h) const { return b * seq * width() + h * head_dim; }
};

// Row i of the scaled scores: softmax over its first i + 1 entries, zeros after.
template <typename T>
__attribute__((always_inline)) inline void CausalSoftmaxRow(T* row, int64_t i, int64_t seq,
                                                            T scale) {
  for (int64_t j = 0; j <= i; ++j) row[j] *= scale;
  const T max = RowMax(row, i + 1);
  // The exponentials (float_math.h) and their sum over 16 lanes (lane_sum.h), as
  // PyTorch's vectorised softmax sums a vector's lanes: one running sum, a chain of
  // dependent adds, was an eighth of the attention's time at a context of 1024.
  const T sum = LaneSum<T, 16>(i + 1, [&](int64_t j) {
    row[j] = float_math::Exp(row[j] - max);
    return row[j];
  });
  const T inverse = T{1} / sum;
  for (int64_t j = 0; j <= i; ++j) row[j] *= inverse;
  std::fill(row + i + 1, row + seq, T{0});
}

// Every row of one head's [seq, seq] scores.
template <typename T>
__attribute__((always_inline)) inline void CausalSoftmax(T* scores, int64_t seq, T scale) {
  for (int64_t i = 0; i < seq; ++i) CausalSoftmaxRow(scores + i * seq, i, seq, scale);
}

// dS = P * (dP - rowsum(dP * P)) * scale in dP's place, row by row, zeros above the
// diagonal.
template <typename T>
__attribute__((always_inline)) inline void CausalSoftmaxBackward(const T* probs, T* grad,
                                                                 int64_t seq, T scale) {
  for (int64_t i = 0; i < seq; ++i) {
    const T* p_row = probs + i * seq;
    T* d_row = grad + i * seq;
    const T dot = LaneSum<T, 16>(i + 1, [&](int64_t j) { return d_row[j] * p_row[j]; });
    for (int64_t j = 0; j <= i; ++j) d_row[j] = p_row[j] * (d_row[j] - dot) * scale;
    std::fill(d_row + i + 1, d_row + seq, T{0});
  }
}

// Training's float forms cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES void CausalSoftmaxF(float* scores, int64_t seq, float scale) {
  CausalSoftmax(scores, seq, scale);
}

SHARDWISE_VECTOR_CLONES void CausalSoftmaxBackwardF(const float* probs, float* grad, int64_t seq,
                                                    float scale) {
  CausalSoftmaxBackward(probs, grad, seq, scale);
}

// The products in blocks of kCausalBlock rows, skipping the blocks above the diagonal,
// whose probabilities and gradients are zeros: query rows [i0, i0 + rows) see keys
// [0, i0 + rows) only, key rows [j0, j0 + keys) are seen by queries [j0, seq) only. That
// is 3/4 of the full products' work at a context of two blocks (the benchmark's 128),
// about half at many. A skipped term is an exact zero, and BLAS's sums run in order, so
// the results are the full products' (gpt_bench's `losses`: unchanged bit for bit).
constexpr int64_t kCausalBlock = 64;

template <typename F>
void ForEachBlock(int64_t seq, const F& f) {
  for (int64_t start = 0; start < seq; start += kCausalBlock) {
    f(start, std::min(kCausalBlock, seq - start));
  }
}

}  // namespace

template <typename T>
void AttentionForward(const T* qkv, int64_t batch, int64_t seq, int64_t heads, int64_t head_dim,
                      T* out, T* probs) {
  const HeadView view{seq, heads, head_dim};
  const int64_t ld = 3 * view.width();
  const T scale = AttentionScale<T>(head_dim);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      T* p = probs + (b * heads + h) * seq * seq;
      const T* q = qkv + view.qkv_offset(b, h, 0);
      const T* k = qkv + view.qkv_offset(b, h, 1);
      const T* v = qkv + view.qkv_offset(b, h, 2);
      T* o = out + view.out_offset(b, h);
      // Scores left of the diagonal's block; the softmax writes the zeros right of it.
      ForEachBlock(seq, [&](int64_t i0, int64_t rows) {
        Gemm(false, true, rows, i0 + rows, head_dim, T{1}, q + i0 * ld, ld, k, ld, T{0},
             p + i0 * seq, seq);
      });
      if constexpr (std::is_same_v<T, float>) {
        CausalSoftmaxF(p, seq, scale);
      } else {
        CausalSoftmax(p, seq, scale);
      }
      ForEachBlock(seq, [&](int64_t i0, int64_t rows) {
        Gemm(false, false, rows, head_dim, i0 + rows, T{1}, p + i0 * seq, seq, v, ld, T{0},
             o + i0 * view.width(), view.width());
      });
    }
  }
}

template <typename T>
void AttentionBackward(const T* qkv, const T* probs, const T* dout, int64_t batch, int64_t seq,
                       int64_t heads, int64_t head_dim, T* dqkv) {
  const HeadView view{seq, heads, head_dim};
  const int64_t ld = 3 * view.width();
  const T scale = AttentionScale<T>(head_dim);
  std::vector<T> ds(seq * seq);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      const T* p = probs + (b * heads + h) * seq * seq;
      const T* dout_h = dout + view.out_offset(b, h);
      const int64_t width = view.width();
      const T* q = qkv + view.qkv_offset(b, h, 0);
      const T* k = qkv + view.qkv_offset(b, h, 1);
      const T* v = qkv + view.qkv_offset(b, h, 2);
      T* dq = dqkv + view.qkv_offset(b, h, 0);
      T* dk = dqkv + view.qkv_offset(b, h, 1);
      T* dv = dqkv + view.qkv_offset(b, h, 2);
      T* g = ds.data();
      // dP, then dS in its place (the softmax's backward writes the zeros right of the
      // diagonal's block); dv, dq and dk from the blocks at and below it.
      ForEachBlock(seq, [&](int64_t i0, int64_t rows) {
        Gemm(false, true, rows, i0 + rows, head_dim, T{1}, dout_h + i0 * width, width, v, ld, T{0},
             g + i0 * seq, seq);
      });
      ForEachBlock(seq, [&](int64_t j0, int64_t keys) {
        Gemm(true, false, keys, head_dim, seq - j0, T{1}, p + j0 * seq + j0, seq,
             dout_h + j0 * width, width, T{0}, dv + j0 * ld, ld);
      });
      if constexpr (std::is_same_v<T, float>) {
        CausalSoftmaxBackwardF(p, g, seq, scale);
      } else {
        CausalSoftmaxBackward(p, g, seq, scale);
      }
      ForEachBlock(seq, [&](int64_t i0, int64_t rows) {
        Gemm(false, false, rows, head_dim, i0 + rows, T{1}, g + i0 * seq, seq, k, ld, T{0},
             dq + i0 * ld, ld);
      });
      ForEachBlock(seq, [&](int64_t j0, int64_t keys) {
        Gemm(true, false, keys, head_dim, seq - j0, T{1}, g + j0 * seq + j0, seq, q + j0 * ld, ld,
             T{0}, dk + j0 * ld, ld);
      });
    }
  }
}

template void AttentionForward(const float*, int64_t, int64_t, int64_t, int64_t, float*, float*);
template void AttentionForward(const double*, int64_t, int64_t, int64_t, int64_t, double*, double*);
template void AttentionBackward(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                                int64_t, float*);
template void AttentionBackward(const double*, const double*, const double*, int64_t, int64_t,
                                int64_t, int64_t, double*);

}  // namespace shardwise::cpu
