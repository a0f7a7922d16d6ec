#include "worker/compute/cpu/tile_product.h"

#include <algorithm>
#include <array>
#include <utility>

#include "worker/compute/cpu/gemm.h"

#if defined(__x86_64__)
// GCC 12 warns that its own AVX-512 intrinsics read an uninitialised value (their
// _mm512_undefined_ps operand, GCC bug 105593, fixed in GCC 13): a false alarm, silenced
// for the header's code alone.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace shardwise::cpu {
namespace internal {

// A tile with unit k stride is BLAS's A; one with unit row stride, its transpose.
template <typename T>
void TileProductBlas(int64_t m, int64_t n, int64_t k, T alpha, StridedTile<T> a, const T* b,
                     int64_t ldb, bool accumulate, T* c, int64_t ldc) {
  const bool transposed = a.k_stride != 1;
  Gemm(transposed, false, m, n, k, alpha, a.data, transposed ? a.k_stride : a.row_stride, b, ldb,
       accumulate ? T{1} : T{0}, c, ldc);
}

template void TileProductBlas(int64_t, int64_t, int64_t, float, StridedTile<float>, const float*,
                              int64_t, bool, float*, int64_t);
template void TileProductBlas(int64_t, int64_t, int64_t, double, StridedTile<double>, const double*,
                              int64_t, bool, double*, int64_t);

}  // namespace internal

#if defined(__x86_64__)
namespace {

// A register block: up to 6 rows of C by up to 64 columns (four 16-float vectors), its
// sums over k in registers: per k, B's row loaded once and each of A's entries broadcast
// against it. 6 rows by 4 vectors: 24 sums, 4 of B and one broadcast, 29 of AVX-512's 32
// registers. A block's rows and vectors are template arguments (Block below), so that
// nothing but the sums lives in the loop; only a last vector of fewer than 16 columns
// takes a mask.
constexpr int kBlockRows = 6;
constexpr int kVectors = 4;
constexpr int64_t kBlockColumns = int64_t{16} * kVectors;
// k in chunks, so that the 64 x kChunk piece of B that the row blocks all read stays in
// the L1 cache (32 KiB); C gathers the chunks' sums.
constexpr int64_t kChunk = 128;

// One block's operands: A's and B's first entries at the block's first k, C's first
// entry, the sums' depth, and whether C's values are added to (else overwritten).
struct BlockArgs {
  const float* a;
  const float* b;
  float* c;
  int64_t depth;
  bool add;
};

// Vector v of a block's kVectorCount, the last one masked to `last` where kMaskLast.
template <int kVectorCount, bool kMaskLast>
__attribute__((target("avx512f"), always_inline)) inline __m512 Load(int v, __mmask16 last,
                                                                     const float* from) {
  return kMaskLast && v == kVectorCount - 1 ? _mm512_maskz_loadu_ps(last, from)
                                            : _mm512_loadu_ps(from);
}

// kRows rows by kVectors vectors of 16 columns, the last one masked to `last` where
// kMaskLast (a product whose columns are not a multiple of 16).
template <int kRows, int kVectorCount, bool kMaskLast>
__attribute__((target("avx512f"))) void Block(const BlockArgs& at, const StridedTile<float>& a,
                                              int64_t ldb, int64_t ldc, float alpha,
                                              __mmask16 last) {
  __m512 sums[kRows][kVectorCount];
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectorCount; ++v) sums[r][v] = _mm512_setzero_ps();
  }
  for (int64_t kk = 0; kk < at.depth; ++kk) {
    __m512 row[kVectorCount];
    const float* b_k = at.b + kk * ldb;
    for (int v = 0; v < kVectorCount; ++v)
      row[v] = Load<kVectorCount, kMaskLast>(v, last, b_k + int64_t{16} * v);
    const float* a_k = at.a + kk * a.k_stride;
    for (int r = 0; r < kRows; ++r) {
      const __m512 entry = _mm512_set1_ps(a_k[r * a.row_stride]);
      for (int v = 0; v < kVectorCount; ++v) {
        sums[r][v] = _mm512_fmadd_ps(entry, row[v], sums[r][v]);
      }
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  for (int r = 0; r < kRows; ++r) {
    for (int v = 0; v < kVectorCount; ++v) {
      float* out = at.c + r * ldc + int64_t{16} * v;
      __m512 value = _mm512_mul_ps(sums[r][v], scale);
      if (at.add) value = _mm512_add_ps(value, Load<kVectorCount, kMaskLast>(v, last, out));
      if (kMaskLast && v == kVectorCount - 1) {
        _mm512_mask_storeu_ps(out, last, value);
      } else {
        _mm512_storeu_ps(out, value);
      }
    }
  }
}

using BlockFunction = void (*)(const BlockArgs&, const StridedTile<float>&, int64_t, int64_t, float,
                               __mmask16);

// Every block's form, by [rows - 1][vectors - 1][masked].
template <int... kRows>
constexpr auto BlockTable(std::integer_sequence<int, kRows...>) {
  using Row = std::array<std::array<BlockFunction, 2>, kVectors>;
  return std::array<Row, sizeof...(kRows)>{Row{
      std::array<BlockFunction, 2>{&Block<kRows + 1, 1, false>, &Block<kRows + 1, 1, true>},
      std::array<BlockFunction, 2>{&Block<kRows + 1, 2, false>, &Block<kRows + 1, 2, true>},
      std::array<BlockFunction, 2>{&Block<kRows + 1, 3, false>, &Block<kRows + 1, 3, true>},
      std::array<BlockFunction, 2>{&Block<kRows + 1, 4, false>, &Block<kRows + 1, 4, true>}}...};
}
constexpr auto kBlocks = BlockTable(std::make_integer_sequence<int, kBlockRows>{});

// Rows [0, rows) of `columns` (1 to 64) columns.
void AnyBlock(int rows, int64_t columns, const BlockArgs& at, const StridedTile<float>& a,
              int64_t ldb, int64_t ldc, float alpha) {
  const int64_t vectors = (columns + 15) / 16;
  const int64_t partial = columns % 16;
  const auto last = static_cast<__mmask16>(partial == 0 ? 0xffff : (1u << partial) - 1);
  kBlocks[rows - 1][vectors - 1][partial != 0](at, a, ldb, ldc, alpha, last);
}

// The part of a product that rows [r0, r0 + rows) need, by the triangle's kind: the
// columns below `end_column` and the k in [k_begin, k_end).
struct Needed {
  int64_t end_column, k_begin, k_end;
};

Needed NeededBy(const Triangle& triangle, int64_t r0, int rows, int64_t n, int64_t k) {
  const int64_t last = r0 + rows - 1 + triangle.diagonal;  // the last row's diagonal
  switch (triangle.kind) {
    case Triangle::kLowerC:  // whole vectors of columns: C's rest may hold anything
      return {std::clamp<int64_t>((last + 16) / 16 * 16, 0, n), 0, k};
    case Triangle::kLowerA:
      return {n, 0, std::clamp<int64_t>(last + 1, 0, k)};
    case Triangle::kLowerATransposed:
      return {n, std::clamp<int64_t>(r0 - triangle.diagonal, 0, k), k};
    case Triangle::kNone:
      break;
  }
  return {n, 0, k};
}

// Rows [r0, r0 + rows) of columns [c0, c0 + 64) over the k chunk [k0, k0 + kChunk): the
// first chunk writes C (or adds to it where `accumulate`), the later ones add, and a row
// block that needs none of a chunk skips it unless it has to write C's zeros.
__attribute__((target("avx512f"))) void RowBlockOfChunk(int64_t r0, int rows, int64_t c0,
                                                        int64_t k0, int64_t n, int64_t k,
                                                        float alpha, const StridedTile<float>& a,
                                                        const float* b, int64_t ldb,
                                                        bool accumulate, float* c, int64_t ldc,
                                                        const Triangle& triangle) {
  const Needed needed = NeededBy(triangle, r0, rows, n, k);
  const int64_t columns = std::min(kBlockColumns, needed.end_column - c0);
  if (columns <= 0) return;
  const int64_t begin = std::max(needed.k_begin, k0);
  const int64_t end = std::min(needed.k_end, std::min(k, k0 + kChunk));
  const bool first = k0 == 0;
  if (end <= begin && !(first && !accumulate)) return;
  const BlockArgs at{a.data + r0 * a.row_stride + begin * a.k_stride, b + begin * ldb + c0,
                     c + r0 * ldc + c0, std::max<int64_t>(end - begin, 0), accumulate || !first};
  AnyBlock(rows, columns, at, a, ldb, ldc, alpha);
}

__attribute__((target("avx512f"))) void VectorTileProduct(int64_t m, int64_t n, int64_t k,
                                                          float alpha, StridedTile<float> a,
                                                          const float* b, int64_t ldb,
                                                          bool accumulate, float* c, int64_t ldc,
                                                          const Triangle& triangle) {
  for (int64_t c0 = 0; c0 < n; c0 += kBlockColumns) {
    for (int64_t k0 = 0; k0 == 0 || k0 < k; k0 += kChunk) {
      for (int64_t r0 = 0; r0 < m; r0 += kBlockRows) {
        const int rows = static_cast<int>(std::min<int64_t>(kBlockRows, m - r0));
        RowBlockOfChunk(r0, rows, c0, k0, n, k, alpha, a, b, ldb, accumulate, c, ldc, triangle);
      }
    }
  }
}

// The same bits seen as 8 doubles, for the 64-bit interleaves.
__attribute__((target("avx512f"), always_inline)) inline __m512d AsDoubles(__m512 x) {
  return _mm512_castps_pd(x);
}

// 16 rows by 16 columns transposed in registers: pairs of rows
// interleaved by 32 bits, then by 64 (each 128-bit lane then holds one column of four
// rows), then the lanes gathered by two shuffles.
__attribute__((target("avx512f"))) void TransposeBlock16(const float* from, int64_t from_stride,
                                                         float* to, int64_t to_stride) {
  __m512 rows[16], pairs[16], quads[16];
  for (int r = 0; r < 16; ++r) rows[r] = _mm512_loadu_ps(from + r * from_stride);
  for (int r = 0; r < 16; r += 2) {
    pairs[r] = _mm512_unpacklo_ps(rows[r], rows[r + 1]);
    pairs[r + 1] = _mm512_unpackhi_ps(rows[r], rows[r + 1]);
  }
  for (int r = 0; r < 16; r += 4) {
    quads[r] = _mm512_castpd_ps(_mm512_unpacklo_pd(AsDoubles(pairs[r]), AsDoubles(pairs[r + 2])));
    quads[r + 1] =
        _mm512_castpd_ps(_mm512_unpackhi_pd(AsDoubles(pairs[r]), AsDoubles(pairs[r + 2])));
    quads[r + 2] =
        _mm512_castpd_ps(_mm512_unpacklo_pd(AsDoubles(pairs[r + 1]), AsDoubles(pairs[r + 3])));
    quads[r + 3] =
        _mm512_castpd_ps(_mm512_unpackhi_pd(AsDoubles(pairs[r + 1]), AsDoubles(pairs[r + 3])));
  }
  // quads[4 g + j]'s lane L holds column 4 L + j of rows 4 g .. 4 g + 3.
  for (int j = 0; j < 4; ++j) {
    const __m512 even_low = _mm512_shuffle_f32x4(quads[j], quads[4 + j], 0x88);
    const __m512 odd_low = _mm512_shuffle_f32x4(quads[j], quads[4 + j], 0xdd);
    const __m512 even_high = _mm512_shuffle_f32x4(quads[8 + j], quads[12 + j], 0x88);
    const __m512 odd_high = _mm512_shuffle_f32x4(quads[8 + j], quads[12 + j], 0xdd);
    _mm512_storeu_ps(to + j * to_stride, _mm512_shuffle_f32x4(even_low, even_high, 0x88));
    _mm512_storeu_ps(to + (8 + j) * to_stride, _mm512_shuffle_f32x4(even_low, even_high, 0xdd));
    _mm512_storeu_ps(to + (4 + j) * to_stride, _mm512_shuffle_f32x4(odd_low, odd_high, 0x88));
    _mm512_storeu_ps(to + (12 + j) * to_stride, _mm512_shuffle_f32x4(odd_low, odd_high, 0xdd));
  }
}

}  // namespace

bool HasVectorTileProducts() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

template <>
void TileProduct(int64_t m, int64_t n, int64_t k, float alpha, StridedTile<float> a, const float* b,
                 int64_t ldb, bool accumulate, float* c, int64_t ldc, Triangle triangle) {
  if (HasVectorTileProducts()) {
    VectorTileProduct(m, n, k, alpha, a, b, ldb, accumulate, c, ldc, triangle);
  } else {
    internal::TileProductBlas(m, n, k, alpha, a, b, ldb, accumulate, c, ldc);
  }
}

#else

bool HasVectorTileProducts() { return false; }

template <>
void TileProduct(int64_t m, int64_t n, int64_t k, float alpha, StridedTile<float> a, const float* b,
                 int64_t ldb, bool accumulate, float* c, int64_t ldc, Triangle) {
  internal::TileProductBlas(m, n, k, alpha, a, b, ldb, accumulate, c, ldc);
}

#endif

namespace {

template <typename T>
void TransposeScalar(const T* from, int64_t from_stride, int64_t rows, int64_t columns, T* to,
                     int64_t to_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < columns; ++c) to[c * to_stride + r] = from[r * from_stride + c];
  }
}

}  // namespace

template <>
void Transpose(const double* from, int64_t from_stride, int64_t rows, int64_t columns, double* to,
               int64_t to_stride) {
  TransposeScalar(from, from_stride, rows, columns, to, to_stride);
}

template <>
void Transpose(const float* from, int64_t from_stride, int64_t rows, int64_t columns, float* to,
               int64_t to_stride) {
  int64_t whole_rows = 0, whole_columns = 0;
#if defined(__x86_64__)
  if (HasVectorTileProducts()) {
    whole_rows = rows / 16 * 16;
    whole_columns = columns / 16 * 16;
    for (int64_t r = 0; r < whole_rows; r += 16) {
      for (int64_t c = 0; c < whole_columns; c += 16) {
        TransposeBlock16(from + r * from_stride + c, from_stride, to + c * to_stride + r,
                         to_stride);
      }
    }
  }
#endif
  // The edges: columns past the whole blocks for every row, rows past them for the rest.
  TransposeScalar(from + whole_columns, from_stride, rows, columns - whole_columns,
                  to + whole_columns * to_stride, to_stride);
  TransposeScalar(from + whole_rows * from_stride, from_stride, rows - whole_rows, whole_columns,
                  to + whole_rows, to_stride);
}

template <>
void TileProduct(int64_t m, int64_t n, int64_t k, double alpha, StridedTile<double> a,
                 const double* b, int64_t ldb, bool accumulate, double* c, int64_t ldc, Triangle) {
  internal::TileProductBlas(m, n, k, alpha, a, b, ldb, accumulate, c, ldc);
}

}  // namespace shardwise::cpu
