#ifndef SHARDWISE_WORKER_COMPUTE_CPU_TILE_PRODUCT_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_TILE_PRODUCT_H_

// The fused attention's products on the CPU (fused_attention.cc), each a small GEMM on
// tiles already in the core's cache:
//   C[r, c] = alpha * sum_k A(r, k) B[k, c]  (+ C[r, c] where `accumulate`),
// A read through strides (A(r, k) = a[r * row_stride + k * k_stride], so a tile or its
// transpose), B row-major. With AVX-512 they run in register blocks of 6 rows by 64
// columns with FMA, reading the operands where they lie: BLAS copies ("packs") both
// operands of every call first, which for the attention's 64-wide tiles cost as much as a
// fifth of the products' time. Elsewhere (and for double, which the gradient checks run)
// they go to BLAS (gemm.h). The two sum in different orders: results agree to rounding
// (tile_product_test).

#include <cstdint>

namespace shardwise::cpu {

template <typename T>
struct StridedTile {
  const T* data;
  int64_t row_stride, k_stride;
};

// Which part of a causal product matters, row r against column (or k) j of row r's
// diagonal, j = r + diagonal: kLowerC, C's entries right of it are not needed (they are
// left as they were, or anything); kLowerA, A is zero right of it (A(r, k) = 0 for
// k > r + diagonal); kLowerATransposed, A is the transpose of such a matrix (A(r, k) = 0
// for r > k + diagonal). The AVX-512 blocks skip that work, a third of it on a causal
// tile; BLAS does all of it, to the same result.
struct Triangle {
  enum Kind { kNone, kLowerC, kLowerA, kLowerATransposed } kind = kNone;
  int64_t diagonal = 0;
};

// Whether TileProduct<float> runs the AVX-512 blocks on this CPU.
bool HasVectorTileProducts();

template <typename T>
void TileProduct(int64_t m, int64_t n, int64_t k, T alpha, StridedTile<T> a, const T* b,
                 int64_t ldb, bool accumulate, T* c, int64_t ldc, Triangle triangle = {});

// to[c * to_stride + r] = from[r * from_stride + c] for r < rows, c < columns: the
// transposed operands the products read B from (16 x 16 blocks in AVX-512 registers
// where the CPU has them).
template <typename T>
void Transpose(const T* from, int64_t from_stride, int64_t rows, int64_t columns, T* to,
               int64_t to_stride);

namespace internal {
// The BLAS form, whatever the CPU (for tests and benchmarks).
template <typename T>
void TileProductBlas(int64_t m, int64_t n, int64_t k, T alpha, StridedTile<T> a, const T* b,
                     int64_t ldb, bool accumulate, T* c, int64_t ldc);
}  // namespace internal

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_TILE_PRODUCT_H_
