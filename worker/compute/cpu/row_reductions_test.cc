// LaneSum's fixed order and RowMax's answer at every length around the lanes' groups:
// the tails that run under a mask, the pairwise combine, and row maxima in the tail. The
// reductions are called from functions cloned as the kernels' are (vector_clones.h), so
// that the AVX-512 (or AVX2) forms the kernels run are the ones checked.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/test_values.h"
#include "worker/compute/cpu/vector_clones.h"

namespace shardwise::cpu {
namespace {

SHARDWISE_VECTOR_CLONES float SumIn16Lanes(const float* x, int64_t n) {
  return LaneSum<float, 16>(n, [&](int64_t j) { return x[j]; });
}

SHARDWISE_VECTOR_CLONES float SumIn4Lanes(const float* x, int64_t n) {
  return LaneSum<float, 4>(n, [&](int64_t j) { return x[j]; });
}

SHARDWISE_VECTOR_CLONES float MaxOfRow(const float* x, int64_t n) { return RowMax(x, n); }

// Lanes combined pairwise, level by level: (l0 + l1) + (l2 + l3) for four.
float CombinePairwise(std::vector<float> lanes) {
  for (size_t width = lanes.size(); width > 1; width /= 2) {
    for (size_t l = 0; l < width / 2; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

// The order LaneSum promises, written out plainly: lane l holds terms l, l + kLanes, ...
// in turn.
template <size_t kLanes>
float ReferenceLaneSum(const std::vector<float>& x) {
  std::vector<float> lanes(kLanes, 0.0f);
  for (size_t j = 0; j < x.size(); ++j) lanes[j % kLanes] += x[j];
  return CombinePairwise(std::move(lanes));
}

// Another order a lane sum could take: the terms past the last whole group into lane 0.
float TailIntoLaneZero(const std::vector<float>& x) {
  constexpr size_t kLanes = 16;
  std::vector<float> lanes(kLanes, 0.0f);
  const size_t whole = x.size() - x.size() % kLanes;
  for (size_t j = 0; j < x.size(); ++j) lanes[j < whole ? j % kLanes : 0] += x[j];
  return CombinePairwise(std::move(lanes));
}

// Terms of mixed magnitudes, so that another order rounds differently.
std::vector<float> MixedTerms(size_t n, int seed) {
  std::vector<float> x = RandomValues(n, seed);
  for (size_t j = 0; j < n; j += 3) x[j] *= 1e4f;
  return x;
}

TEST(LaneSumTest, EveryLengthSumsInTheDocumentedOrder) {
  int told_apart = 0;  // lengths at which the other order gives other bits
  for (int64_t n = 0; n <= 70; ++n) {
    const std::vector<float> x = MixedTerms(n, static_cast<int>(n) + 1);
    EXPECT_EQ(SumIn16Lanes(x.data(), n), ReferenceLaneSum<16>(x)) << "n = " << n;
    EXPECT_EQ(SumIn4Lanes(x.data(), n), ReferenceLaneSum<4>(x)) << "n = " << n;
    if (TailIntoLaneZero(x) != ReferenceLaneSum<16>(x)) ++told_apart;
  }
  // The terms are such that the check above can tell the orders apart.
  EXPECT_GT(told_apart, 20);
}

TEST(LaneSumTest, TermsPastTheEndAreNeverEvaluated) {
  for (int64_t n = 1; n <= 40; ++n) {
    int64_t highest = -1;
    LaneSum<double, 16>(n, [&](int64_t j) {
      highest = std::max(highest, j);
      return 1.0;
    });
    EXPECT_EQ(highest, n - 1) << "n = " << n;
  }
}

TEST(RowMaxTest, TheMaximumWhereverItLiesAndNothingPastTheRow) {
  for (int64_t n = 1; n <= 50; ++n) {
    for (int64_t at = 0; at < n; ++at) {
      // All negative (a lane that started at zero would win), and larger values past the
      // row's end (a tail read unmasked would win).
      std::vector<float> x = RandomValues(n + 16, static_cast<int>(n * 100 + at), 10.0);
      for (int64_t j = 0; j < n; ++j) x[j] -= 20.0f;
      std::fill(x.begin() + n, x.end(), 1e30f);
      x[at] = -1.5f;
      EXPECT_EQ(MaxOfRow(x.data(), n), -1.5f) << "n = " << n << ", at " << at;
    }
  }
}

TEST(RowMaxTest, IsTheLargestOfRandomRowsAroundItsLanes) {
  const std::vector<float> x = RandomValues(1003, 31);
  for (const int64_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 1003}) {
    EXPECT_EQ(MaxOfRow(x.data(), n), *std::max_element(x.begin(), x.begin() + n)) << n;
  }
}

}  // namespace
}  // namespace shardwise::cpu
