#ifndef SHARDWISE_WORKER_COMPUTE_FUSED_ATTENTION_ROWS_H_
#define SHARDWISE_WORKER_COMPUTE_FUSED_ATTENTION_ROWS_H_

// Fused (flash-style) causal self-attention, one row at a time: the arithmetic that the
// CPU's loops (cpu/fused_attention.cc) and the CUDA kernels (cuda/fused_attention.cu, one
// thread per row) share, so a GPU runs exactly what the CPU tests check. Nothing of size
// seq x seq exists: the forward keeps each query row's log-sum-exp of its scaled scores,
// the backward recomputes each probability from it (FlashAttention's online softmax and
// recomputation, Dao et al. 2022).
//
// Layout and function are those of cpu/attention.h: qkv [batch, seq, 3C], out [batch,
// seq, C], head h at columns h * head_dim, s_ij = (q_i . k_j) * scale with scale =
// 1 / sqrt(head_dim), P = the softmax of each row i over j <= i. Per head:
//   forward, query row i, keys in tiles of kKeyTile with a running max m and sum l:
//     m' = max(m, max over the tile of s),  l = l e^(m - m') + sum over the tile e^(s - m'),
//     acc = acc e^(m - m') + sum over the tile e^(s - m') v;  out_i = acc / l,
//     lse_i = m + log l.
//   backward: D_i = dout_i . out_i (which equals sum_j P_ij dP_ij), P_ij = e^(s_ij - lse_i),
//     dS_ij = P_ij (dout_i . v_j - D_i);
//     query row i: dq_i = scale sum_{j <= i} dS_ij k_j;
//     key row j:   dv_j = sum_{i >= j} P_ij dout_i,  dk_j = scale sum_{i >= j} dS_ij q_i.
// Each output row is one caller's sum in a fixed order: no atomics, the same bits on every
// run. The rounding differs from the materialised softmax's (the sums run in other
// orders), not the function.
//
// Rows are passed as objects with size() and operator[], so that a caller keeps them
// where its device reads them fastest: MemoryRow (CPU memory, GPU global memory),
// cuda/fused_attention.cu's register and shared-memory rows.
//
// The values read in place (q, k, v, out, dout) are stored as S, the sums run in
// AccumulatorOf<S>: FP64 for the CPU's FP64 reference, float for FP32 and for 16-bit
// storage (a GPU job's BF16 or FP16 values, widened exactly as they are read), so a row
// over 16-bit values computes what it computes over their FP32 widening, bit for bit.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "worker/compute/attention_shape.h"
#include "worker/compute/host_device.h"

namespace shardwise::fused_attention {

// Keys per step of the online softmax: one rescale of the accumulator per tile.
inline constexpr int kKeyTile = 16;

enum Part { kQuery = 0, kKey = 1, kValue = 2 };

// `n` values at `values`, consecutive.
template <typename T>
struct MemoryRow {
  T* values;
  int64_t n;
  SHARDWISE_HOST_DEVICE int64_t size() const { return n; }
  SHARDWISE_HOST_DEVICE T& operator[](int64_t d) const { return values[d]; }
};

// Where head h of sequence b keeps its rows.
struct HeadLayout {
  AttentionShape shape;
  int64_t b, h;
  // Row i's part (q, k or v) in qkv or dqkv [batch, seq, 3C].
  SHARDWISE_HOST_DEVICE int64_t qkv(int64_t i, Part part) const {
    return ((b * shape.seq + i) * 3 + part) * shape.width() + h * shape.head_dim;
  }
  // Row i in out, dout [batch, seq, C].
  SHARDWISE_HOST_DEVICE int64_t row(int64_t i) const {
    return (b * shape.seq + i) * shape.width() + h * shape.head_dim;
  }
  // Row i's statistic in lse, dots [batch, heads, seq].
  SHARDWISE_HOST_DEVICE int64_t stat(int64_t i) const {
    return (b * shape.heads + h) * shape.seq + i;
  }
};

// The GPU kernels' blocks of query rows: one per (sequence, head, `rows_per_block`
// consecutive rows), numbered in one grid dimension with the row blocks varying fastest,
// then the heads, then the sequences. One dimension because a grid's x holds 2^31 - 1
// blocks where y and z hold 65,535 each, fewer than a micro-batch of sequences (or heads)
// may need.
struct RowBlock {
  int64_t b, h, first_row;
};
SHARDWISE_HOST_DEVICE inline int64_t RowBlocksPerHead(const AttentionShape& shape,
                                                      int64_t rows_per_block) {
  return (shape.seq + rows_per_block - 1) / rows_per_block;
}
SHARDWISE_HOST_DEVICE inline int64_t RowBlockCount(const AttentionShape& shape,
                                                   int64_t rows_per_block) {
  return RowBlocksPerHead(shape, rows_per_block) * shape.heads * shape.batch;
}
SHARDWISE_HOST_DEVICE inline RowBlock RowBlockAt(const AttentionShape& shape,
                                                 int64_t rows_per_block, int64_t index) {
  const int64_t per_head = RowBlocksPerHead(shape, rows_per_block);
  const int64_t head = index / per_head;  // b * heads + h
  return {head / shape.heads, head % shape.heads, (index % per_head) * rows_per_block};
}

// The type sums run in for values stored as S.
template <typename S>
struct Accumulator {
  using type = float;
};
template <>
struct Accumulator<double> {
  using type = double;
};
template <typename S>
using AccumulatorOf = typename Accumulator<S>::type;

// A stored value as T (a 16-bit storage type through its own conversion to float).
template <typename T, typename S>
SHARDWISE_HOST_DEVICE T Widen(const S& x) {
  return static_cast<T>(x);
}

SHARDWISE_HOST_DEVICE inline float Exp(float x) { return expf(x); }
SHARDWISE_HOST_DEVICE inline double Exp(double x) { return exp(x); }
SHARDWISE_HOST_DEVICE inline float Log(float x) { return logf(x); }
SHARDWISE_HOST_DEVICE inline double Log(double x) { return log(x); }
template <typename T>
SHARDWISE_HOST_DEVICE T Max(T a, T b) {
  return a < b ? b : a;
}
template <typename T>
SHARDWISE_HOST_DEVICE T MinusInfinity() {
  return -static_cast<T>(INFINITY);
}

// a . x for a row a and values x, in kDotLanes interleaved partial sums (element d into
// lane d % kDotLanes, the tail into lane 0), added pairwise: independent chains a CPU
// overlaps and vectorises, in one fixed order on every device.
inline constexpr int kDotLanes = 8;

template <typename T, typename Row, typename S>
SHARDWISE_HOST_DEVICE T Dot(const Row& a, const S* x) {
  T lanes[kDotLanes] = {};
  const int64_t n = a.size(), whole = n - n % kDotLanes;
  SHARDWISE_UNROLL
  for (int64_t d = 0; d < whole; d += kDotLanes) {
    SHARDWISE_UNROLL
    for (int l = 0; l < kDotLanes; ++l) lanes[l] += a[d + l] * Widen<T>(x[d + l]);
  }
  for (int64_t d = whole; d < n; ++d) lanes[0] += a[d] * Widen<T>(x[d]);
  SHARDWISE_UNROLL
  for (int width = kDotLanes / 2; width > 0; width /= 2) {
    SHARDWISE_UNROLL
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

template <typename T, typename Row>
SHARDWISE_HOST_DEVICE void Fill(Row& a, T value) {
  SHARDWISE_UNROLL
  for (int64_t d = 0; d < a.size(); ++d) a[d] = value;
}

// RoundedProduct (host_device.h) pins the online softmax's rescale, followed by the first
// key's `acc += p v`, and the scores the tile's maximum and exponentials both read (the
// backward's recomputed scores too, so its probabilities are the forward's): every
// instantiation rounds them as the FP32 one does.

template <typename T, typename Row>
SHARDWISE_HOST_DEVICE void Multiply(Row& a, T factor) {
  SHARDWISE_UNROLL
  for (int64_t d = 0; d < a.size(); ++d) a[d] = RoundedProduct(a[d], factor);
}

// a += c x.
template <typename T, typename Row, typename S>
SHARDWISE_HOST_DEVICE void AddScaled(Row& a, T c, const S* x) {
  SHARDWISE_UNROLL
  for (int64_t d = 0; d < a.size(); ++d) a[d] += c * Widen<T>(x[d]);
}

// Query row i's attention output into `acc`; returns its log-sum-exp.
template <typename S, typename QRow, typename AccRow>
SHARDWISE_HOST_DEVICE AccumulatorOf<S> ForwardRow(const HeadLayout& at, const S* qkv, int64_t i,
                                                  const QRow& q, AccRow& acc) {
  using T = AccumulatorOf<S>;
  const T scale = AttentionScale<T>(at.shape.head_dim);
  T max = MinusInfinity<T>(), sum = 0;
  Fill(acc, T{0});
  for (int64_t first = 0; first <= i; first += kKeyTile) {
    T scores[kKeyTile];
    T tile_max = MinusInfinity<T>();
    SHARDWISE_UNROLL
    for (int t = 0; t < kKeyTile; ++t) {
      const int64_t j = first + t;
      scores[t] =
          j <= i ? RoundedProduct(Dot<T>(q, qkv + at.qkv(j, kKey)), scale) : MinusInfinity<T>();
      tile_max = Max(tile_max, scores[t]);
    }
    // The tile holds key `first` <= i, so new_max is finite and e^(max - new_max) is 0
    // for the first tile (max = -inf), never NaN.
    const T new_max = Max(max, tile_max);
    const T correction = Exp(max - new_max);
    sum = RoundedProduct(sum, correction);
    Multiply(acc, correction);
    SHARDWISE_UNROLL
    for (int t = 0; t < kKeyTile; ++t) {
      const int64_t j = first + t;
      if (j > i) break;
      const T p = Exp(scores[t] - new_max);
      sum += p;
      AddScaled(acc, p, qkv + at.qkv(j, kValue));
    }
    max = new_max;
  }
  Multiply(acc, T{1} / sum);
  return max + Log(sum);
}

// Query row i's dq into `dq` (rows `q` and `dout` its q and output gradient), and its
// D_i = dout_i . out_i into `dots`, which the key rows read.
template <typename S, typename QRow, typename AccRow>
SHARDWISE_HOST_DEVICE void QueryGradientRow(const HeadLayout& at, const S* qkv, const S* out,
                                            const AccumulatorOf<S>* lse, int64_t i, const QRow& q,
                                            const QRow& dout, AccRow& dq, AccumulatorOf<S>* dots) {
  using T = AccumulatorOf<S>;
  const T scale = AttentionScale<T>(at.shape.head_dim);
  const T dot = Dot<T>(dout, out + at.row(i));
  dots[at.stat(i)] = dot;
  const T row_lse = lse[at.stat(i)];
  Fill(dq, T{0});
  for (int64_t j = 0; j <= i; ++j) {
    const S* k = qkv + at.qkv(j, kKey);
    const T p = Exp(RoundedProduct(Dot<T>(q, k), scale) - row_lse);
    const T ds = p * (Dot<T>(dout, qkv + at.qkv(j, kValue)) - dot);
    AddScaled(dq, ds, k);
  }
  Multiply(dq, scale);
}

// Key row j's dk and dv (rows `k`, `v` its key and value). Queries before j are masked;
// the loop starts at `first_query` <= j so that the threads of a GPU warp, each on its
// own key, read the same query row at once.
template <typename S, typename KRow, typename AccRow>
SHARDWISE_HOST_DEVICE void KeyValueGradientRow(const HeadLayout& at, const S* qkv, const S* dout,
                                               const AccumulatorOf<S>* lse,
                                               const AccumulatorOf<S>* dots, int64_t j,
                                               int64_t first_query, const KRow& k, const KRow& v,
                                               AccRow& dk, AccRow& dv) {
  using T = AccumulatorOf<S>;
  const T scale = AttentionScale<T>(at.shape.head_dim);
  Fill(dk, T{0});
  Fill(dv, T{0});
  for (int64_t i = first_query; i < at.shape.seq; ++i) {
    if (i < j) continue;
    const S* q = qkv + at.qkv(i, kQuery);
    const S* dout_i = dout + at.row(i);
    const T p = Exp(RoundedProduct(Dot<T>(k, q), scale) - lse[at.stat(i)]);
    AddScaled(dv, p, dout_i);
    const T ds = p * (Dot<T>(v, dout_i) - dots[at.stat(i)]);
    AddScaled(dk, ds, q);
  }
  Multiply(dk, scale);
}

// The three steps with every row read and accumulated in memory, all of one type T (their
// outputs are the accumulators): the CPU's reference loops, and the GPU's for FP32 head
// sizes without a register specialisation.

// Writes out's row i and lse_i.
template <typename T>
SHARDWISE_HOST_DEVICE void ForwardInMemory(const HeadLayout& at, const T* qkv, int64_t i, T* out,
                                           T* lse) {
  const int64_t n = at.shape.head_dim;
  const MemoryRow<const T> q{qkv + at.qkv(i, kQuery), n};
  MemoryRow<T> acc{out + at.row(i), n};
  lse[at.stat(i)] = ForwardRow(at, qkv, i, q, acc);
}

// Writes D_i into `dots` and dq_i into dqkv.
template <typename T>
SHARDWISE_HOST_DEVICE void QueryGradientInMemory(const HeadLayout& at, const T* qkv, const T* out,
                                                 const T* lse, const T* dout, int64_t i, T* dots,
                                                 T* dqkv) {
  const int64_t n = at.shape.head_dim;
  const MemoryRow<const T> q{qkv + at.qkv(i, kQuery), n}, dout_i{dout + at.row(i), n};
  MemoryRow<T> dq{dqkv + at.qkv(i, kQuery), n};
  QueryGradientRow(at, qkv, out, lse, i, q, dout_i, dq, dots);
}

// Writes dk_j and dv_j into dqkv (`dots` as QueryGradientInMemory wrote them).
template <typename T>
SHARDWISE_HOST_DEVICE void KeyValueGradientInMemory(const HeadLayout& at, const T* qkv,
                                                    const T* dout, const T* lse, const T* dots,
                                                    int64_t j, int64_t first_query, T* dqkv) {
  const int64_t n = at.shape.head_dim;
  const MemoryRow<const T> k{qkv + at.qkv(j, kKey), n}, v{qkv + at.qkv(j, kValue), n};
  MemoryRow<T> dk{dqkv + at.qkv(j, kKey), n}, dv{dqkv + at.qkv(j, kValue), n};
  KeyValueGradientRow(at, qkv, dout, lse, dots, j, first_query, k, v, dk, dv);
}

}  // namespace shardwise::fused_attention

#endif  // SHARDWISE_WORKER_COMPUTE_FUSED_ATTENTION_ROWS_H_
