// compute/norm_rows.h, the GPU's LayerNorm and RMSNorm rows (one warp per row, float sums),
// run on the host as a warp runs them: against the formulas in FP64 within float rounding,
// over widths below, at and past a warp's groups, not multiples of a group, and large
// (GPT-2's 768, a Llama's 4096); every element summed once (a skipped or doubled group
// moves the results far past the bounds).

#include "worker/compute/norm_rows.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/casts.h"
#include "worker/compute/sixteen_bit_value.h"

namespace shardwise::norm_rows {
namespace {

std::vector<float> Random(int64_t n, unsigned seed, float offset = 0.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& value : values) value = uniform(generator) + offset;
  return values;
}

constexpr float kEps = 1e-5f;
constexpr int64_t kWidths[] = {1, 3, 4, 5, 31, 127, 128, 129, 768, 1001, 4096};

// Relative to the row's scale: float sums of `dim` terms round by about dim * 2^-24.
double Bound(int64_t dim) { return 4e-7 * std::sqrt(static_cast<double>(dim)) + 2e-7; }

TEST(NormRows, WarpRowSumAddsEveryElementOnce) {
  for (const int64_t dim : kWidths) {
    std::vector<float> ones(dim, 1.0f);
    EXPECT_EQ(WarpRowSum(dim, HostRow{ones.data(), dim}), static_cast<float>(dim)) << dim;
    // Element j weighted j + 1: a group counted twice or skipped changes the total.
    std::vector<float> ramp(dim);
    for (int64_t j = 0; j < dim; ++j) ramp[j] = static_cast<float>(j + 1);
    EXPECT_EQ(WarpRowSum(dim, HostRow{ramp.data(), dim}),
              static_cast<float>(dim) * static_cast<float>(dim + 1) / 2.0f)
        << dim;
  }
}

TEST(NormRows, ButterflySumIsTheLanesTotalInEveryOrderItTakes) {
  float lanes[kLanes];
  for (int l = 0; l < kLanes; ++l) lanes[l] = static_cast<float>(1 << (l % 20));
  double want = 0;
  for (float value : lanes) want += value;
  EXPECT_EQ(ButterflySum(lanes), static_cast<float>(want));
}

TEST(NormRows, LayerNormMatchesTheFormulaInFp64) {
  for (const int64_t dim : kWidths) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    // An offset of 3: the centred second pass keeps the variance exact where one pass
    // (E[x^2] - E[x]^2) would cancel.
    const auto x = Random(dim, 1, 3.0f), w = Random(dim, 2), b = Random(dim, 3);
    const auto dy = Random(dim, 4);
    std::vector<float> y(dim), dx(dim);
    const Moments got = LayerNormForwardRow(HostRow{x.data(), dim}, w.data(), b.data(), dim, kEps,
                                            HostWarp{}, kWholeRow, y.data());
    LayerNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w.data(), got, dim,
                          HostWarp{}, kWholeRow, dx.data());
    double mean = 0, var = 0;
    for (float v : x) mean += v;
    mean /= dim;
    for (float v : x) var += (v - mean) * (v - mean);
    var /= dim;
    const double rstd = 1.0 / std::sqrt(var + kEps);
    EXPECT_NEAR(got.mean, mean, Bound(dim) * 3.0);
    EXPECT_NEAR(got.rstd, rstd, Bound(dim) * rstd);
    double g_mean = 0, g_xhat_mean = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double g = static_cast<double>(dy[j]) * w[j], xhat = (x[j] - mean) * rstd;
      g_mean += g / dim;
      g_xhat_mean += g * xhat / dim;
    }
    for (int64_t j = 0; j < dim; ++j) {
      const double xhat = (x[j] - mean) * rstd, g = static_cast<double>(dy[j]) * w[j];
      ASSERT_NEAR(y[j], xhat * w[j] + b[j], Bound(dim) * 8) << "y[" << j << "]";
      ASSERT_NEAR(dx[j], rstd * (g - g_mean - xhat * g_xhat_mean), Bound(dim) * 8 * rstd)
          << "dx[" << j << "]";
    }
  }
}

TEST(NormRows, RmsNormMatchesTheFormulaInFp64) {
  for (const int64_t dim : kWidths) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim);
    const auto x = Random(dim, 5), w = Random(dim, 6), dy = Random(dim, 7);
    std::vector<float> y(dim), dx(dim);
    const float got_rstd = RmsNormForwardRow(HostRow{x.data(), dim}, w.data(), dim, kEps,
                                             HostWarp{}, kWholeRow, y.data());
    RmsNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w.data(), got_rstd, dim,
                        HostWarp{}, kWholeRow, dx.data());
    double squares = 0, dot = 0;
    for (int64_t j = 0; j < dim; ++j) {
      squares += static_cast<double>(x[j]) * x[j];
      dot += static_cast<double>(dy[j]) * w[j] * x[j];
    }
    const double rstd = 1.0 / std::sqrt(squares / dim + kEps);
    EXPECT_NEAR(got_rstd, rstd, Bound(dim) * rstd);
    const double coefficient = rstd * rstd * rstd * dot / dim;
    for (int64_t j = 0; j < dim; ++j) {
      ASSERT_NEAR(y[j], w[j] * (x[j] * rstd), Bound(dim) * 4 * rstd) << "y[" << j << "]";
      ASSERT_NEAR(dx[j], rstd * dy[j] * w[j] - x[j] * coefficient, Bound(dim) * 8 * rstd)
          << "dx[" << j << "]";
    }
  }
}

// Without a weight (or bias), LayerNorm takes 1 (and 0): the same as passing them.
TEST(NormRows, LayerNormWithoutParametersTakesOneAndZero) {
  const int64_t dim = 130;
  const auto x = Random(dim, 8), dy = Random(dim, 9);
  const std::vector<float> ones(dim, 1.0f), zeros(dim, 0.0f);
  std::vector<float> y_none(dim), y_given(dim), dx_none(dim), dx_given(dim);
  const float* const absent = nullptr;
  const Moments none = LayerNormForwardRow(HostRow{x.data(), dim}, absent, absent, dim, kEps,
                                           HostWarp{}, kWholeRow, y_none.data());
  const Moments given = LayerNormForwardRow(HostRow{x.data(), dim}, ones.data(), zeros.data(), dim,
                                            kEps, HostWarp{}, kWholeRow, y_given.data());
  EXPECT_EQ(y_none, y_given);
  LayerNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, absent, none, dim,
                        HostWarp{}, kWholeRow, dx_none.data());
  LayerNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, ones.data(), given, dim,
                        HostWarp{}, kWholeRow, dx_given.data());
  EXPECT_EQ(dx_none, dx_given);
}

// A GPU lane writes only its own groups: the lanes together write each element once, as
// the whole row does.
TEST(NormRows, TheLanesWritesCoverTheRowOnce) {
  const int64_t dim = 1001;
  const auto x = Random(dim, 10), w = Random(dim, 11), b = Random(dim, 12);
  std::vector<float> whole(dim), by_lanes(dim, NAN);
  LayerNormForwardRow(HostRow{x.data(), dim}, w.data(), b.data(), dim, kEps, HostWarp{}, kWholeRow,
                      whole.data());
  for (int lane = 0; lane < kLanes; ++lane) {
    LayerNormForwardRow(HostRow{x.data(), dim}, w.data(), b.data(), dim, kEps, HostWarp{},
                        Writer{lane, kLanes}, by_lanes.data());
  }
  EXPECT_EQ(by_lanes, whole);
}

// Weights stored in 16 bits (a GPU job's 16-bit storage reads a norm's weight and bias in
// place) give the bits their FP32 widening gives: forward and input gradient, both norms.
template <ScalarType kType>
void ExpectSixteenBitWeightsActAsTheirWidening(int64_t dim) {
  const auto x = Random(dim, 21), dy = Random(dim, 22);
  auto w = Random(dim, 23, 1.0f), b = Random(dim, 24);
  cpu::RoundToPrecision(kType, w.data(), w.size());
  cpu::RoundToPrecision(kType, b.data(), b.size());
  const auto w16 = testing::StoredSixteenBit<kType>(w), b16 = testing::StoredSixteenBit<kType>(b);
  std::vector<float> want(dim), got(dim);
  const Moments moments = LayerNormForwardRow(HostRow{x.data(), dim}, w.data(), b.data(), dim, kEps,
                                              HostWarp{}, kWholeRow, want.data());
  LayerNormForwardRow(HostRow{x.data(), dim}, w16.data(), b16.data(), dim, kEps, HostWarp{},
                      kWholeRow, got.data());
  EXPECT_EQ(got, want) << "LayerNorm y";
  LayerNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w.data(), moments, dim,
                        HostWarp{}, kWholeRow, want.data());
  LayerNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w16.data(), moments, dim,
                        HostWarp{}, kWholeRow, got.data());
  EXPECT_EQ(got, want) << "LayerNorm dx";
  const float rstd = RmsNormForwardRow(HostRow{x.data(), dim}, w.data(), dim, kEps, HostWarp{},
                                       kWholeRow, want.data());
  RmsNormForwardRow(HostRow{x.data(), dim}, w16.data(), dim, kEps, HostWarp{}, kWholeRow,
                    got.data());
  EXPECT_EQ(got, want) << "RMSNorm y";
  RmsNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w.data(), rstd, dim,
                      HostWarp{}, kWholeRow, want.data());
  RmsNormInputGradRow(HostRow{x.data(), dim}, HostRow{dy.data(), dim}, w16.data(), rstd, dim,
                      HostWarp{}, kWholeRow, got.data());
  EXPECT_EQ(got, want) << "RMSNorm dx";
}

TEST(NormRows, SixteenBitWeightsActAsTheirFp32Widening) {
  for (const int64_t dim : kWidths) {
    SCOPED_TRACE(::testing::Message() << "width " << dim);
    ExpectSixteenBitWeightsActAsTheirWidening<ScalarType::kBFloat16>(dim);
    ExpectSixteenBitWeightsActAsTheirWidening<ScalarType::kFloat16>(dim);
  }
}

}  // namespace
}  // namespace shardwise::norm_rows
