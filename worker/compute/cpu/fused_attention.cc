#include "worker/compute/cpu/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/tile_product.h"
#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/float_math.h"

namespace shardwise::cpu {
namespace {

constexpr int64_t kTile = kFusedAttentionTile;
constexpr int64_t kBlock = kFusedAttentionBlock;

// The distance between the transposes' rows: whole cache lines and one line more (rows a
// power of two apart, a context of 1024 floats, would share the cache's sets too).
int64_t TransposedStride(int64_t seq) { return (seq + 15) / 16 * 16 + 16; }

// What a HeadPanels holds at a context of `seq`: for the forward one [seq, dim] panel (v)
// and one transpose (k's); for the backward six panels (q, k, dout, and the sums of dq,
// and of a grouped head's dk and dv) and two transposes (k's and v's).
int64_t PanelFloats(int64_t seq, int64_t dim, bool backward) {
  return (backward ? 6 : 1) * seq * dim + (backward ? 2 : 1) * dim * TransposedStride(seq);
}

// `rows` rows of `columns` from rows `from_stride` apart to rows `to_stride` apart: a loop
// the compiler vectorises, where std::copy_n's call into memmove per row of a head (64
// floats) cost as much as the copy.
template <typename T>
__attribute__((always_inline)) inline void CopyRowsOf(const T* from, int64_t from_stride,
                                                      int64_t rows, int64_t columns, T* to,
                                                      int64_t to_stride) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < columns; ++c) to[i * to_stride + c] = from[i * from_stride + c];
  }
}

SHARDWISE_VECTOR_CLONES void CopyRows(const float* from, int64_t from_stride, int64_t rows,
                                      int64_t columns, float* to, int64_t to_stride) {
  CopyRowsOf(from, from_stride, rows, columns, to, to_stride);
}

void CopyRows(const double* from, int64_t from_stride, int64_t rows, int64_t columns, double* to,
              int64_t to_stride) {
  CopyRowsOf(from, from_stride, rows, columns, to, to_stride);
}

// to += from, rows as CopyRows's (a grouped head's dk and dv into its K/V head's).
template <typename T>
void AddRows(const T* from, int64_t from_stride, int64_t rows, int64_t columns, T* to,
             int64_t to_stride) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < columns; ++c) to[i * to_stride + c] += from[i * from_stride + c];
  }
}

// One head of one sequence. The tile products read their right-hand operand B from
// copies (HeadPanels below): [seq, dim] rows one after another, or transposed ([dim,
// seq], rows t_stride apart); their left-hand one A from the copies too where the pass
// has them (the backward's q and dout), else in place, from rows `q_stride` apart (q
// rows are 3C apart packed, C apart separate; k and v rows `kv_stride`; out and dout rows
// C). Null where a pass needs no such copy.
template <typename T>
struct Head {
  int64_t seq = 0, dim = 0, q_stride = 0, kv_stride = 0, out_stride = 0;
  T scale = 0;
  const T *q_rows = nullptr, *dout_rows = nullptr;                    // in place
  const T *q = nullptr, *k = nullptr, *v = nullptr, *dout = nullptr;  // copies
  const T *k_t = nullptr, *v_t = nullptr;
  T* dq = nullptr;  // the backward's dq sums, [seq, dim], zeroed
  // The backward's dk and dv sums, [seq, dim], for a query head that is not the first of
  // its K/V head's group (BackwardHead).
  T *group_dk = nullptr, *group_dv = nullptr;
  int64_t t_stride = 0;
  // Keys [j0, j0 + keys) that query i may see: those <= i.
  static int64_t Visible(int64_t i, int64_t j0, int64_t keys) {
    return std::clamp<int64_t>(i - j0 + 1, 0, keys);
  }
};

// A thread's copies of one head's operands at a time, kept between calls (they grow to
// the longest context seen). A product reads all of B's rows for each block of six rows
// of A; in place, B's rows lie 3C (or C) floats apart, which at the GPT's widths is a
// multiple of 1 KiB, so a tile's rows share a few of the L1 cache's sets and evict each
// other (the products ran a quarter slower; the backward's A from its copies rather
// than in place, 5% faster again). The copies cost O(seq x dim) per head against the
// products' O(seq^2 x dim).
template <typename T>
class HeadPanels {
 public:
  // Head h of sequence b (reading its group's K/V head): for the forward (`dout` null), v
  // and k transposed; for the backward, q, k and dout, k and v transposed, and dq's sums
  // (which every key tile adds to: in place, those rows too would evict each other).
  Head<T> Load(const QkvSpan<const T*>& qkv, const T* dout, const AttentionShape& shape, int64_t b,
               int64_t h) {
    const int64_t width = shape.width(), seq = shape.seq, dim = shape.head_dim;
    const int64_t kv_offset = qkv.KvHeadOffset(b, h, shape);
    const T* k_rows = qkv.k + kv_offset;
    const T* v_rows = qkv.v + kv_offset;
    Head<T> at;
    at.seq = seq;
    at.dim = dim;
    at.q_stride = qkv.q_stride;
    at.kv_stride = qkv.kv_stride;
    at.out_stride = width;
    at.scale = AttentionScale<T>(dim);
    at.q_rows = qkv.QHead(b, h, shape);
    at.t_stride = TransposedStride(seq);
    const int64_t panel = seq * dim, transposed = dim * at.t_stride;
    const int64_t needed = PanelFloats(seq, dim, dout != nullptr);
    if (static_cast<int64_t>(storage_.size()) < needed) storage_.resize(needed);
    T* next = storage_.data();
    const auto copy = [&](const T* from, int64_t stride) {
      T* to = next;
      CopyRows(from, stride, seq, dim, to, dim);
      next += panel;
      return to;
    };
    const auto transpose = [&](const T* from) {
      T* to = next;
      Transpose(from, at.kv_stride, seq, dim, to, at.t_stride);
      next += transposed;
      return to;
    };
    at.k_t = transpose(k_rows);
    if (dout == nullptr) {
      at.v = copy(v_rows, at.kv_stride);
      return at;
    }
    at.dout_rows = dout + b * seq * width + h * dim;
    at.v_t = transpose(v_rows);
    at.q = copy(at.q_rows, at.q_stride);
    at.k = copy(k_rows, at.kv_stride);
    at.dout = copy(at.dout_rows, at.out_stride);
    at.dq = next;
    std::fill_n(at.dq, panel, T{0});
    next += panel;
    at.group_dk = next;
    at.group_dv = next + panel;
    return at;
  }

 private:
  std::vector<T> storage_;
};

// The forward of one query tile [i0, i0 + rows) over its key blocks: per block the
// scores by a tile product, each row's running max and sum rescaled (the online
// softmax), the probabilities' product with the values added into the tile's output;
// then out = that / sum and lse = max + log(sum).
template <typename T>
struct ForwardWork {
  std::vector<T> scores = std::vector<T>(kTile * kBlock), max = std::vector<T>(kTile),
                 sum = std::vector<T>(kTile), out;  // out: kTile x dim, as the head needs
};

// One key block's online-softmax step for the query tile's rows (scores kBlock apart,
// output rows dim apart): each row's scores turned into e^(s - new max) in place (zeros
// past what the row sees) and summed over 16 lanes (lane_sum.h), its sum and max
// updated, its output rescaled for the new max.
template <typename T>
__attribute__((always_inline)) inline void OnlineSoftmaxStep(int64_t dim, int64_t i0, int64_t rows,
                                                             int64_t j0, int64_t keys, T* scores,
                                                             T* max, T* sum, T* out) {
  for (int64_t r = 0; r < rows; ++r) {
    T* s = scores + r * kBlock;
    const int64_t visible = Head<T>::Visible(i0 + r, j0, keys);
    if (visible == 0) {
      std::fill_n(s, keys, T{0});
      continue;
    }
    const bool first = max[r] == -std::numeric_limits<T>::infinity();
    const T new_max = std::max(max[r], RowMax(s, visible));
    const T tile_sum = LaneSum<T, 16>(visible, [&](int64_t c) {
      s[c] = float_math::Exp(s[c] - new_max);
      return s[c];
    });
    std::fill(s + visible, s + keys, T{0});
    const T old_max = max[r];
    max[r] = new_max;
    if (first) {  // the sum and the output are 0 yet: nothing to rescale
      sum[r] = tile_sum;
      continue;
    }
    const T correction = float_math::Exp(old_max - new_max);
    sum[r] = sum[r] * correction + tile_sum;
    T* o = out + r * dim;
    for (int64_t d = 0; d < dim; ++d) o[d] *= correction;
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
SHARDWISE_VECTOR_CLONES void OnlineSoftmaxStepF(int64_t dim, int64_t i0, int64_t rows, int64_t j0,
                                                int64_t keys, float* scores, float* max, float* sum,
                                                float* out) {
  OnlineSoftmaxStep(dim, i0, rows, j0, keys, scores, max, sum, out);
}

SHARDWISE_VECTOR_CLONES void ProbabilitiesAndGradsF(const float* lse, const float* dots, int64_t i0,
                                                    int64_t rows, int64_t j0, int64_t keys,
                                                    float* p, float* ds) {
  ProbabilitiesAndGrads(lse, dots, i0, rows, j0, keys, p, ds);
}

// `out`: the head's output rows, `out_stride` apart.
template <typename T>
void ForwardQueryTile(const Head<T>& at, int64_t i0, int64_t rows, T* out, int64_t out_stride,
                      T* lse, ForwardWork<T>& work) {
  const int64_t dim = at.dim;
  work.out.assign(rows * dim, T{0});
  T* scores = work.scores.data();
  T* max = work.max.data();
  T* sum = work.sum.data();
  T* tile_out = work.out.data();
  std::fill_n(max, rows, -std::numeric_limits<T>::infinity());
  std::fill_n(sum, rows, T{0});
  // Keys up to the tile's last row, so only the diagonal's 64 x 64 is part waste.
  for (int64_t j0 = 0; j0 < i0 + rows; j0 += kBlock) {
    const int64_t keys = std::min(kBlock, i0 + rows - j0);
    const Triangle needed{Triangle::kLowerC, i0 - j0}, causal{Triangle::kLowerA, i0 - j0};
    TileProduct<T>(rows, keys, dim, at.scale, {at.q_rows + i0 * at.q_stride, at.q_stride, 1},
                   at.k_t + j0, at.t_stride, false, scores, kBlock, needed);
    if constexpr (std::is_same_v<T, float>) {
      OnlineSoftmaxStepF(dim, i0, rows, j0, keys, scores, max, sum, tile_out);
    } else {
      OnlineSoftmaxStep(dim, i0, rows, j0, keys, scores, max, sum, tile_out);
    }
    TileProduct<T>(rows, dim, keys, T{1}, {scores, kBlock, 1}, at.v + j0 * dim, dim, true, tile_out,
                   dim, causal);
  }
  for (int64_t r = 0; r < rows; ++r) {
    const T inverse = T{1} / sum[r];
    T* o = out + (i0 + r) * out_stride;
    for (int64_t d = 0; d < dim; ++d) o[d] = tile_out[r * dim + d] * inverse;
    lse[i0 + r] = max[r] + std::log(sum[r]);
  }
}

// The working space of one (query block, key tile) pair of the backward.
template <typename T>
struct Tiles {
  std::vector<T> probs = std::vector<T>(kBlock * kTile), grads = std::vector<T>(kBlock * kTile);
};

// Where one head's backward adds its dk and dv: rows `stride` apart.
template <typename T>
struct KeyValueGrads {
  T *dk, *dv;
  int64_t stride;
};

// The backward of one (query block, key tile) pair: P again from the scores and each
// row's lse, dP = dout v^T, dS = P (dP - D), then dv += P^T dout, dk += scale dS^T q,
// dq += scale dS k, each a tile product, into the head's gradients ([seq, dim] each).
template <typename T>
void BackwardTilePair(const Head<T>& at, const T* lse, const T* dots, int64_t i0, int64_t rows,
                      int64_t j0, int64_t keys, Tiles<T>& work, const KeyValueGrads<T>& to) {
  const int64_t dim = at.dim;
  T* p = work.probs.data();
  T* ds = work.grads.data();
  // Query i0 + r sees key j0 + c where c <= r + i0 - j0: P and dS are zero right of that.
  const int64_t diagonal = i0 - j0;
  const Triangle needed{Triangle::kLowerC, diagonal}, causal{Triangle::kLowerA, diagonal},
      causal_transposed{Triangle::kLowerATransposed, diagonal};
  TileProduct<T>(rows, keys, dim, at.scale, {at.q + i0 * dim, dim, 1}, at.k_t + j0, at.t_stride,
                 false, p, kTile, needed);
  TileProduct<T>(rows, keys, dim, T{1}, {at.dout + i0 * dim, dim, 1}, at.v_t + j0, at.t_stride,
                 false, ds, kTile, needed);
  if constexpr (std::is_same_v<T, float>) {
    ProbabilitiesAndGradsF(lse, dots, i0, rows, j0, keys, p, ds);
  } else {
    ProbabilitiesAndGrads(lse, dots, i0, rows, j0, keys, p, ds);
  }
  TileProduct<T>(keys, dim, rows, T{1}, {p, 1, kTile}, at.dout + i0 * dim, dim, true,
                 to.dv + j0 * to.stride, to.stride, causal_transposed);
  TileProduct<T>(keys, dim, rows, at.scale, {ds, 1, kTile}, at.q + i0 * dim, dim, true,
                 to.dk + j0 * to.stride, to.stride, causal_transposed);
  TileProduct<T>(rows, dim, keys, at.scale, {ds, kTile, 1}, at.k + j0 * dim, dim, true,
                 at.dq + i0 * dim, dim, causal);
}

// One head's backward: each row's D = dout . out, then the tile pairs' gradients. The
// first query head of a K/V head's group adds its dk and dv in place into the gradient's
// rows (zeroed first); each other head into its panels, which are then added to the rows:
// each K/V head's gradient is the sum of its query heads' in head order, as the packed
// layout's UnpackGroupedQkvGrad sums them (to the bit). dq is copied from its sums.
template <typename T>
void BackwardHead(const Head<T>& at, const T* out, const T* lse, T* dots, T* dq, int64_t dq_stride,
                  const KeyValueGrads<T>& rows, bool first_of_group, Tiles<T>& work) {
  const KeyValueGrads<T> to =
      first_of_group ? rows : KeyValueGrads<T>{at.group_dk, at.group_dv, at.dim};
  for (int64_t i = 0; i < at.seq; ++i) {
    const T* o = out + i * at.out_stride;
    const T* g = at.dout_rows + i * at.out_stride;
    dots[i] = LaneSum<T, 16>(at.dim, [&](int64_t d) { return g[d] * o[d]; });
    for (T* row : {to.dk, to.dv}) std::fill_n(row + i * to.stride, at.dim, T{0});
  }
  for (int64_t j0 = 0; j0 < at.seq; j0 += kTile) {
    const int64_t keys = std::min(kTile, at.seq - j0);
    for (int64_t i0 = j0; i0 < at.seq; i0 += kBlock) {  // the queries that see key j0
      BackwardTilePair(at, lse, dots, i0, std::min(kBlock, at.seq - i0), j0, keys, work, to);
    }
  }
  if (!first_of_group) {
    AddRows(to.dk, to.stride, at.seq, at.dim, rows.dk, rows.stride);
    AddRows(to.dv, to.stride, at.seq, at.dim, rows.dv, rows.stride);
  }
  CopyRows(at.dq, at.dim, at.seq, at.dim, dq, dq_stride);
}

}  // namespace

int64_t FusedAttentionScratchFloats(int64_t seq, int64_t head_dim) {
  const int64_t forward_work = kTile * kBlock + 2 * kTile + kTile * head_dim;  // ForwardWork
  const int64_t backward_work = 2 * kBlock * kTile;                            // Tiles
  return forward_work + backward_work + PanelFloats(seq, head_dim, false) +
         PanelFloats(seq, head_dim, true);
}

template <typename T>
void FusedAttentionForward(const QkvSpan<const T*>& qkv, const AttentionShape& shape, T* out,
                           T* lse) {
  // Kept per thread: fresh blocks each call cost page faults.
  thread_local ForwardWork<T> work;
  thread_local HeadPanels<T> panels;
  const int64_t width = shape.width();
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head<T> at = panels.Load(qkv, nullptr, shape, b, h);
      T* head_out = out + b * shape.seq * width + h * shape.head_dim;
      T* head_lse = lse + (b * shape.heads + h) * shape.seq;
      for (int64_t i0 = 0; i0 < shape.seq; i0 += kTile) {
        ForwardQueryTile(at, i0, std::min(kTile, shape.seq - i0), head_out, width, head_lse, work);
      }
    }
  }
}

template <typename T>
void FusedAttentionBackward(const QkvSpan<const T*>& qkv, const T* out, const T* lse, const T* dout,
                            const AttentionShape& shape, T* dots, const QkvSpan<T*>& dqkv) {
  thread_local Tiles<T> work;  // as the forward's
  thread_local HeadPanels<T> panels;
  const int64_t width = shape.width(), seq = shape.seq, dim = shape.head_dim;
  const int64_t group = shape.heads / qkv.kv_heads;
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const Head<T> at = panels.Load(qkv, dout, shape, b, h);
      const int64_t stats = (b * shape.heads + h) * seq;
      const int64_t kv_offset = dqkv.KvHeadOffset(b, h, shape);
      const KeyValueGrads<T> kv_rows{dqkv.k + kv_offset, dqkv.v + kv_offset, dqkv.kv_stride};
      BackwardHead(at, out + b * seq * width + h * dim, lse + stats, dots + stats,
                   dqkv.QHead(b, h, shape), dqkv.q_stride, kv_rows, h % group == 0, work);
    }
  }
}

template void FusedAttentionForward(const QkvSpan<const float*>&, const AttentionShape&, float*,
                                    float*);
template void FusedAttentionForward(const QkvSpan<const double*>&, const AttentionShape&, double*,
                                    double*);
template void FusedAttentionBackward(const QkvSpan<const float*>&, const float*, const float*,
                                     const float*, const AttentionShape&, float*,
                                     const QkvSpan<float*>&);
template void FusedAttentionBackward(const QkvSpan<const double*>&, const double*, const double*,
                                     const double*, const AttentionShape&, double*,
                                     const QkvSpan<double*>&);

}  // namespace shardwise::cpu
