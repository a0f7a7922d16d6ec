#include "worker/compute/cpu/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "worker/compute/cpu/gemm.h"
#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/float_math.h"

namespace shardwise::cpu {
namespace {

constexpr int64_t kTile = kFusedAttentionTile;
constexpr int64_t kBlock = kFusedAttentionBlock;

// One head of one sequence: its q, k, v rows (stride 3C), out and dout rows (stride C),
// and its statistics (one per query row).
template <typename T>
struct Head {
  int64_t seq, dim, stride, out_stride;
  const T *q, *k, *v;
  T scale;
  // Keys [j0, j0 + keys) that query i may see: those <= i.
  static int64_t Visible(int64_t i, int64_t j0, int64_t keys) {
    return std::clamp<int64_t>(i - j0 + 1, 0, keys);
  }
};

template <typename T>
Head<T> HeadOf(const T* qkv, const AttentionShape& shape, int64_t b, int64_t h) {
  const int64_t width = shape.width(), stride = 3 * width;
  const T* base = qkv + b * shape.seq * stride + h * shape.head_dim;
  return {shape.seq, shape.head_dim, stride,           width,
          base,      base + width,   base + 2 * width, AttentionScale<T>(shape.head_dim)};
}

// The forward of one query tile [i0, i0 + rows) over its key blocks: per block the
// scores by a GEMM, each row's running max and sum rescaled (the online softmax), the
// probabilities' product with the values added by a GEMM; then out /= sum and
// lse = max + log(sum).
template <typename T>
struct ForwardWork {
  std::vector<T> scores = std::vector<T>(kTile * kBlock), max = std::vector<T>(kTile),
                 sum = std::vector<T>(kTile);
};

// One key block's online-softmax step for the query tile's rows (scores kBlock apart):
// each row's scores turned into e^(s - new max) in place (zeros past what the row sees)
// and summed over 16 lanes (lane_sum.h), its sum and max updated, its output rescaled for
// the new max.
template <typename T>
__attribute__((always_inline)) inline void OnlineSoftmaxStep(const Head<T>& at, int64_t i0,
                                                             int64_t rows, int64_t j0, int64_t keys,
                                                             T* scores, T* max, T* sum, T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    T* s = scores + r * kBlock;
    const int64_t visible = Head<T>::Visible(i0 + r, j0, keys);
    if (visible == 0) {
      std::fill_n(s, keys, T{0});
      continue;
    }
    const T new_max = std::max(max[r], RowMax(s, visible));
    // For the first block (max = -inf) the correction is 0 or, in float, ExpF's floor of
    // 1.6e-38: either way it multiplies a sum and an output of 0.
    const T correction = float_math::Exp(max[r] - new_max);
    const T tile_sum = LaneSum<T, 16>(visible, [&](int64_t c) {
      s[c] = float_math::Exp(s[c] - new_max);
      return s[c];
    });
    std::fill(s + visible, s + keys, T{0});
    sum[r] = sum[r] * correction + tile_sum;
    max[r] = new_max;
    T* o = out + (i0 + r) * at.out_stride;
    for (int64_t d = 0; d < at.dim; ++d) o[d] *= correction;
  }
}

// The backward's rows of one (query block, key tile) pair, kTile apart: P = e^(s - lse)
// in place of the scores and dS = P (dP - D) in place of dP, zeros past what each row
// sees.
template <typename T>
__attribute__((always_inline)) inline void ProbabilitiesAndGrads(const T* lse, const T* dots,
                                                                 int64_t i0, int64_t rows,
                                                                 int64_t j0, int64_t keys, T* p,
                                                                 T* ds) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t visible = Head<T>::Visible(i0 + r, j0, keys);
    T* p_row = p + r * kTile;
    T* ds_row = ds + r * kTile;
    for (int64_t c = 0; c < visible; ++c) {
      p_row[c] = float_math::Exp(p_row[c] - lse[i0 + r]);
      ds_row[c] = p_row[c] * (ds_row[c] - dots[i0 + r]);
    }
    std::fill(p_row + visible, p_row + keys, T{0});
    std::fill(ds_row + visible, ds_row + keys, T{0});
  }
}

// Training's float forms cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES void OnlineSoftmaxStepF(const Head<float>& at, int64_t i0, int64_t rows,
                                                int64_t j0, int64_t keys, float* scores, float* max,
                                                float* sum, float* out) {
  OnlineSoftmaxStep(at, i0, rows, j0, keys, scores, max, sum, out);
}

SHARDWISE_VECTOR_CLONES void ProbabilitiesAndGradsF(const float* lse, const float* dots, int64_t i0,
                                                    int64_t rows, int64_t j0, int64_t keys,
                                                    float* p, float* ds) {
  ProbabilitiesAndGrads(lse, dots, i0, rows, j0, keys, p, ds);
}

template <typename T>
void ForwardQueryTile(const Head<T>& at, int64_t i0, int64_t rows, T* out, T* lse,
                      ForwardWork<T>& work) {
  T* scores = work.scores.data();
  T* max = work.max.data();
  T* sum = work.sum.data();
  std::fill_n(max, rows, -std::numeric_limits<T>::infinity());
  std::fill_n(sum, rows, T{0});
  for (int64_t r = 0; r < rows; ++r) std::fill_n(out + (i0 + r) * at.out_stride, at.dim, T{0});
  // Keys up to the tile's last row, so only the diagonal's 64 x 64 is part waste.
  for (int64_t j0 = 0; j0 < i0 + rows; j0 += kBlock) {
    const int64_t keys = std::min(kBlock, i0 + rows - j0);
    Gemm(false, true, rows, keys, at.dim, at.scale, at.q + i0 * at.stride, at.stride,
         at.k + j0 * at.stride, at.stride, T{0}, scores, kBlock);
    if constexpr (std::is_same_v<T, float>) {
      OnlineSoftmaxStepF(at, i0, rows, j0, keys, scores, max, sum, out);
    } else {
      OnlineSoftmaxStep(at, i0, rows, j0, keys, scores, max, sum, out);
    }
    Gemm(false, false, rows, at.dim, keys, T{1}, scores, kBlock, at.v + j0 * at.stride, at.stride,
         T{1}, out + i0 * at.out_stride, at.out_stride);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T inverse = T{1} / sum[r];
    T* o = out + (i0 + r) * at.out_stride;
    for (int64_t d = 0; d < at.dim; ++d) o[d] *= inverse;
    lse[i0 + r] = max[r] + std::log(sum[r]);
  }
}

// The working space of one (query block, key tile) pair of the backward.
template <typename T>
struct Tiles {
  std::vector<T> probs = std::vector<T>(kBlock * kTile), grads = std::vector<T>(kBlock * kTile);
};

// The backward of one (query block, key tile) pair: P again from the scores and each
// row's lse, dP = dout v^T, dS = P (dP - D), then dv += P^T dout, dk += scale dS^T q,
// dq += scale dS k, each by a GEMM.
template <typename T>
void BackwardTilePair(const Head<T>& at, const T* dout, const T* lse, const T* dots, int64_t i0,
                      int64_t rows, int64_t j0, int64_t keys, Tiles<T>& work, T* dq, T* dk, T* dv) {
  T* p = work.probs.data();
  T* ds = work.grads.data();
  Gemm(false, true, rows, keys, at.dim, at.scale, at.q + i0 * at.stride, at.stride,
       at.k + j0 * at.stride, at.stride, T{0}, p, kTile);
  Gemm(false, true, rows, keys, at.dim, T{1}, dout + i0 * at.out_stride, at.out_stride,
       at.v + j0 * at.stride, at.stride, T{0}, ds, kTile);
  if constexpr (std::is_same_v<T, float>) {
    ProbabilitiesAndGradsF(lse, dots, i0, rows, j0, keys, p, ds);
  } else {
    ProbabilitiesAndGrads(lse, dots, i0, rows, j0, keys, p, ds);
  }
  Gemm(true, false, keys, at.dim, rows, T{1}, p, kTile, dout + i0 * at.out_stride, at.out_stride,
       T{1}, dv + j0 * at.stride, at.stride);
  Gemm(true, false, keys, at.dim, rows, at.scale, ds, kTile, at.q + i0 * at.stride, at.stride, T{1},
       dk + j0 * at.stride, at.stride);
  Gemm(false, false, rows, at.dim, keys, at.scale, ds, kTile, at.k + j0 * at.stride, at.stride,
       T{1}, dq + i0 * at.stride, at.stride);
}

template <typename T>
void BackwardHead(const Head<T>& at, const T* out, const T* dout, const T* lse, T* dots,
                  T* dqkv_head, Tiles<T>& work) {
  T* dq = dqkv_head;
  T* dk = dq + at.out_stride;
  T* dv = dk + at.out_stride;
  for (int64_t i = 0; i < at.seq; ++i) {
    const T* o = out + i * at.out_stride;
    const T* g = dout + i * at.out_stride;
    T dot = 0;
    for (int64_t d = 0; d < at.dim; ++d) dot += g[d] * o[d];
    dots[i] = dot;
    for (T* row : {dq, dk, dv}) std::fill_n(row + i * at.stride, at.dim, T{0});
  }
  for (int64_t j0 = 0; j0 < at.seq; j0 += kTile) {
    const int64_t keys = std::min(kTile, at.seq - j0);
    for (int64_t i0 = j0; i0 < at.seq; i0 += kBlock) {  // the queries that see key j0
      BackwardTilePair(at, dout, lse, dots, i0, std::min(kBlock, at.seq - i0), j0, keys, work, dq,
                       dk, dv);
    }
  }
}

}  // namespace

template <typename T>
void FusedAttentionForward(const T* qkv, const AttentionShape& shape, T* out, T* lse) {
  // Kept per thread: a fresh 128 KiB each call costs page faults.
  thread_local ForwardWork<T> work;
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head<T> at = HeadOf(qkv, shape, b, h);
      T* head_out = out + b * shape.seq * shape.width() + h * shape.head_dim;
      T* head_lse = lse + (b * shape.heads + h) * shape.seq;
      for (int64_t i0 = 0; i0 < shape.seq; i0 += kTile) {
        ForwardQueryTile(at, i0, std::min(kTile, shape.seq - i0), head_out, head_lse, work);
      }
    }
  }
}

template <typename T>
void FusedAttentionBackward(const T* qkv, const T* out, const T* lse, const T* dout,
                            const AttentionShape& shape, T* dots, T* dqkv) {
  thread_local Tiles<T> work;  // as the forward's
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head<T> at = HeadOf(qkv, shape, b, h);
      const int64_t rows = b * shape.seq * shape.width() + h * shape.head_dim;
      const int64_t stats = (b * shape.heads + h) * shape.seq;
      BackwardHead(at, out + rows, dout + rows, lse + stats, dots + stats,
                   dqkv + b * shape.seq * 3 * shape.width() + h * shape.head_dim, work);
    }
  }
}

template void FusedAttentionForward(const float*, const AttentionShape&, float*, float*);
template void FusedAttentionForward(const double*, const AttentionShape&, double*, double*);
template void FusedAttentionBackward(const float*, const float*, const float*, const float*,
                                     const AttentionShape&, float*, float*);
template void FusedAttentionBackward(const double*, const double*, const double*, const double*,
                                     const AttentionShape&, double*, double*);

}  // namespace shardwise::cpu
