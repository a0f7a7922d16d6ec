// TileProduct against the product summed in double, for each way the fused attention
// reads its operands (a tile, a transposed tile), partial register blocks (rows past a
// multiple of 6, columns past a multiple of 16 and of 64), both with and without adding
// into C; and the AVX-512 form against BLAS's where the CPU has it.

#include "worker/compute/cpu/tile_product.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <ostream>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/test_values.h"

namespace shardwise::cpu {
namespace {

struct Shape {
  int64_t m, n, k;
  bool transposed_a, accumulate;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.m << " x " << s.n << " x " << s.k << (s.transposed_a ? ", A transposed" : "")
      << (s.accumulate ? ", adding into C" : "");
}

// C's expected values: alpha * A B (+ C0) with the sums in double.
std::vector<double> Expected(const Shape& s, float alpha, const StridedTile<float>& a,
                             const std::vector<float>& b, int64_t ldb, const std::vector<float>& c0,
                             int64_t ldc) {
  std::vector<double> want(c0.begin(), c0.end());
  for (int64_t r = 0; r < s.m; ++r) {
    for (int64_t col = 0; col < s.n; ++col) {
      double sum = 0;
      for (int64_t kk = 0; kk < s.k; ++kk) {
        sum += double{a.data[r * a.row_stride + kk * a.k_stride]} * b[kk * ldb + col];
      }
      want[r * ldc + col] = alpha * sum + (s.accumulate ? double{c0[r * ldc + col]} : 0.0);
    }
  }
  return want;
}

class TileProductTest : public ::testing::TestWithParam<Shape> {};

TEST_P(TileProductTest, EqualsTheProductSummedInDouble) {
  const Shape s = GetParam();
  // Leading dimensions wider than the tile, as the attention's strided rows are.
  const int64_t lda = (s.transposed_a ? s.m : s.k) + 3, ldb = s.n + 5, ldc = s.n + 7;
  const std::vector<float> a = RandomValues((s.transposed_a ? s.k : s.m) * lda, 1);
  const std::vector<float> b = RandomValues(s.k * ldb, 2);
  const std::vector<float> c0 = RandomValues(s.m * ldc, 3);
  const StridedTile<float> tile =
      s.transposed_a ? StridedTile<float>{a.data(), 1, lda} : StridedTile<float>{a.data(), lda, 1};
  const float alpha = 0.125f;
  const std::vector<double> want = Expected(s, alpha, tile, b, ldb, c0, ldc);
  for (bool blas : {false, true}) {
    std::vector<float> c = c0;
    if (blas) {
      internal::TileProductBlas(s.m, s.n, s.k, alpha, tile, b.data(), ldb, s.accumulate, c.data(),
                                ldc);
    } else {
      TileProduct(s.m, s.n, s.k, alpha, tile, b.data(), ldb, s.accumulate, c.data(), ldc);
    }
    for (int64_t r = 0; r < s.m; ++r) {
      for (int64_t col = 0; col < ldc; ++col) {
        const int64_t i = r * ldc + col;
        if (col >= s.n) {  // past the tile: untouched
          ASSERT_EQ(c[i], c0[i]) << (blas ? "BLAS" : "TileProduct") << " row " << r;
          continue;
        }
        // Float sums of k terms of magnitude alpha at most.
        ASSERT_NEAR(c[i], want[i], 1e-6 * (s.k + 2))
            << (blas ? "BLAS" : "TileProduct") << " row " << r << " column " << col;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, TileProductTest,
    ::testing::Values(Shape{64, 64, 64, false, false},  // the attention's tiles
                      Shape{64, 512, 64, false, false}, Shape{512, 64, 64, false, true},
                      Shape{64, 64, 512, true, true},  // transposed A, long k
                      Shape{13, 37, 9, false, true},   // partial blocks everywhere
                      Shape{5, 80, 3, true, false}, Shape{7, 129, 1, false, false},
                      Shape{1, 1, 1, false, true}, Shape{6, 16, 0, false, true}));

// One product under `kind` at `diagonal`: with A zero right of its diagonal (or its
// transpose's), the blocks that skip those terms give the full product's result; with C
// needed only left of it, those entries are the full product's.
void ExpectTriangleSkipsOnlyWhatItLeavesOut(int64_t m, int64_t n, int64_t k, int64_t diagonal,
                                            Triangle::Kind kind) {
  const int64_t ld = std::max({m, n, k}) + 10;
  const bool transposed = kind == Triangle::kLowerATransposed;
  std::vector<float> a = RandomValues(ld * ld, 4);
  const StridedTile<float> tile =
      transposed ? StridedTile<float>{a.data(), 1, ld} : StridedTile<float>{a.data(), ld, 1};
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const bool zero = kind == Triangle::kLowerA             ? kk > r + diagonal
                        : kind == Triangle::kLowerATransposed ? r > kk + diagonal
                                                              : false;
      if (zero) a[r * tile.row_stride + kk * tile.k_stride] = 0.0f;
    }
  }
  const std::vector<float> b = RandomValues(k * ld, 5), c0 = RandomValues(m * ld, 6);
  const std::vector<double> want = Expected({m, n, k, transposed, true}, 0.5f, tile, b, ld, c0, ld);
  std::vector<float> c = c0;
  TileProduct(m, n, k, 0.5f, tile, b.data(), ld, true, c.data(), ld, {kind, diagonal});
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t col = 0; col < n; ++col) {
      if (kind == Triangle::kLowerC && col > r + diagonal) continue;  // not needed
      ASSERT_NEAR(c[r * ld + col], want[r * ld + col], 1e-6 * (k + 2))
          << m << " x " << n << " x " << k << ", kind " << kind << ", diagonal " << diagonal
          << ", row " << r << " column " << col;
    }
  }
}

// Diagonals before the first column, inside the tile and past it; a depth past one chunk
// of k (128), so a row block's part starts or ends in a later chunk.
TEST(TileProduct, SkipsOnlyWhatTheTriangleLeavesOut) {
  for (const auto& [m, n, k] : {std::array<int64_t, 3>{29, 70, 45}, {150, 40, 300}}) {
    for (const int64_t diagonal : {int64_t{-9}, int64_t{0}, int64_t{7}, int64_t{33}, int64_t{90}}) {
      for (const Triangle::Kind kind :
           {Triangle::kLowerC, Triangle::kLowerA, Triangle::kLowerATransposed}) {
        ExpectTriangleSkipsOnlyWhatItLeavesOut(m, n, k, diagonal, kind);
      }
    }
  }
}

// Whole 16 x 16 blocks (in registers with AVX-512) and the edges past them, from and to
// strided rows.
TEST(Transpose, WritesEachEntryAcross) {
  for (const auto& [rows, columns] :
       {std::pair<int64_t, int64_t>{48, 64}, {37, 21}, {5, 70}, {16, 16}, {1, 1}, {0, 9}}) {
    const int64_t from_stride = columns + 3, to_stride = rows + 5;
    const std::vector<float> from = RandomValues(rows * from_stride + 1, 7);
    std::vector<float> to(columns * to_stride + 1, -7.0f);
    Transpose(from.data(), from_stride, rows, columns, to.data(), to_stride);
    for (int64_t c = 0; c < columns; ++c) {
      for (int64_t r = 0; r < to_stride; ++r) {
        ASSERT_EQ(to[c * to_stride + r], r < rows ? from[r * from_stride + c] : -7.0f)
            << rows << " x " << columns << ": row " << r << ", column " << c;
      }
    }
  }
}

TEST(TileProduct, RunsTheVectorBlocksOnAnAvx512Cpu) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512 here: BLAS runs";
  EXPECT_TRUE(HasVectorTileProducts());
}

}  // namespace
}  // namespace shardwise::cpu
