#ifndef SHARDWISE_WORKER_COMPUTE_LLAMA_ROWS_H_
#define SHARDWISE_WORKER_COMPUTE_LLAMA_ROWS_H_

// The Llama's layers one row (or one element) at a time: the arithmetic that the CPU's
// loops (cpu/llama_layers.cc) and the CUDA kernels (cuda/llama_kernels.cu) share, so a GPU
// runs the formulas the CPU tests check (up to rounding: nvcc may fuse a multiply and an
// add, the CPU build does not). Formulas (HF transformers' modeling_llama.py):
//
// RMSNorm over a row of `dim`:  rstd = 1 / sqrt(sum(x^2) / dim + eps) (the sum in double),
//   y = w * (x * rstd). Backward, g = dy * w:
//   dx = rstd * g - x * rstd^3 * sum(g * x) / dim,   dw += dy * x * rstd (over rows).
//   (The CPU's rows; the GPU runs the same formulas one warp per row with float sums,
//   norm_rows.h.)
// Rotary (rotate-half): per head, for i < half = head_dim / 2, the pair (a, b) = (x[i],
//   x[i + half]) becomes (a c - b s, b c + a s); its transpose (the backward) is the same
//   with -s.
// Grouped-query packing: fused qkv row = [q | k repeated | v repeated], query head h
//   reading K/V head h / (heads / kv_heads) (attention_shape.h's KvHeadOf).

#include <cmath>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace shardwise::llama_rows {

// 1 / sqrt(mean(x^2) + eps) of one row, the squares summed in double.
template <typename T>
SHARDWISE_HOST_DEVICE inline T RmsNormRstd(const T* x, int64_t dim, T eps) {
  double sum = 0;
  for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(x[i]) * x[i];
  return static_cast<T>(1.0 / sqrt(sum / static_cast<double>(dim) + static_cast<double>(eps)));
}

template <typename T>
SHARDWISE_HOST_DEVICE inline void RmsNormForwardRow(const T* x, const T* w, int64_t dim, T rstd,
                                                    T* y) {
  for (int64_t i = 0; i < dim; ++i) y[i] = w[i] * (x[i] * rstd);
}

// dx of one row (dw is a sum over rows: RmsNormWeightGradTerm, in chunks).
template <typename T>
SHARDWISE_HOST_DEVICE inline void RmsNormBackwardRow(const T* x, const T* w, T rstd, const T* dy,
                                                     int64_t dim, T* dx) {
  double dot = 0;  // sum(g * x)
  for (int64_t i = 0; i < dim; ++i) dot += static_cast<double>(dy[i]) * w[i] * x[i];
  const double r = rstd;
  const T coefficient = static_cast<T>(r * r * r * dot / static_cast<double>(dim));
  for (int64_t i = 0; i < dim; ++i) dx[i] = rstd * (dy[i] * w[i]) - x[i] * coefficient;
}

// RMSNorm's weight gradient, dw[j] += sum over rows of dy * (x * rstd), in one order that
// both devices follow, so they agree bit for bit: the rows in chunks of
// kWeightGradChunkRows, each chunk's terms summed from zero in row order, then the chunks'
// sums added to dw[j] in chunk order. A GPU sums a column's chunks in parallel (a column
// has a row per token, thousands of them: a thread per column summing them all left most
// of the GPU idle); the CPU runs the chunks one after another, row-major.
inline constexpr int64_t kWeightGradChunkRows = 64;

SHARDWISE_HOST_DEVICE inline int64_t WeightGradChunks(int64_t rows) {
  return (rows + kWeightGradChunkRows - 1) / kWeightGradChunkRows;
}

// One row's term: each product rounded by itself (no multiply-add contracted on the GPU).
template <typename T>
SHARDWISE_HOST_DEVICE inline T RmsNormWeightGradTerm(T x, T dy, T rstd) {
  return RoundedProduct(dy, RoundedProduct(x, rstd));
}

// One rotary pair in place; `inverse`: the transpose.
template <typename T>
SHARDWISE_HOST_DEVICE inline void RotatePair(T* a, T* b, T c, T s, bool inverse) {
  if (inverse) s = -s;
  // Pinned products: one rounding per product in every instantiation and on the host.
  const T first = RoundedProduct(*a, c) - RoundedProduct(*b, s);
  const T second = RoundedProduct(*b, c) + RoundedProduct(*a, s);
  *a = first;
  *b = second;
}

}  // namespace shardwise::llama_rows

#endif  // SHARDWISE_WORKER_COMPUTE_LLAMA_ROWS_H_
