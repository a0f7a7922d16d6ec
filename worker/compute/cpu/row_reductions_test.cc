// LaneSum's fixed order and RowMax's answer at every length around the lanes' groups:
// the tails that run under a mask, the pairwise combine, and row maxima in the tail.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/test_values.h"

namespace shardwise::cpu {
namespace {

// The order LaneSum promises, written out plainly: lane l holds terms l, l + kLanes, ...
// in turn, then the lanes are combined pairwise, level by level.
template <int kLanes>
float ReferenceLaneSum(const std::vector<float>& x) {
  std::vector<float> lanes(kLanes, 0.0f);
  for (size_t j = 0; j < x.size(); ++j) lanes[j % kLanes] += x[j];
  for (size_t width = kLanes; width > 1; width /= 2) {
    for (size_t l = 0; l < width / 2; ++l) lanes[l] = lanes[2 * l] + lanes[2 * l + 1];
  }
  return lanes[0];
}

// Terms of mixed magnitudes, so that another order rounds differently.
std::vector<float> MixedTerms(size_t n, int seed) {
  std::vector<float> x = RandomValues(n, seed);
  for (size_t j = 0; j < n; j += 3) x[j] *= 1e4f;
  return x;
}

TEST(LaneSumTest, EveryLengthSumsInTheDocumentedOrder) {
  for (int64_t n = 0; n <= 70; ++n) {
    const std::vector<float> x = MixedTerms(n, static_cast<int>(n) + 1);
    const float sum16 = LaneSum<float, 16>(n, [&](int64_t j) { return x[j]; });
    const float sum4 = LaneSum<float, 4>(n, [&](int64_t j) { return x[j]; });
    EXPECT_EQ(sum16, ReferenceLaneSum<16>(x)) << "n = " << n;
    EXPECT_EQ(sum4, ReferenceLaneSum<4>(x)) << "n = " << n;
  }
}

TEST(LaneSumTest, TheOrderIsVisibleInTheBits) {
  // A check that the test above can fail: the plain running sum of these terms rounds
  // differently from the lanes' sum.
  const std::vector<float> x = MixedTerms(37, 7);
  float running = 0.0f;
  for (float term : x) running += term;
  EXPECT_NE(running, ReferenceLaneSum<16>(x));
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

TEST(RowMaxTest, TheMaximumWhereverItLies) {
  for (int64_t n = 1; n <= 50; ++n) {
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> x = RandomValues(n, static_cast<int>(n * 100 + at), 10.0);
      for (float& value : x) value -= 20.0f;  // all negative: a zero would not pass
      x[at] = -1.5f;
      EXPECT_EQ(RowMax(x.data(), n), -1.5f) << "n = " << n << ", at " << at;
    }
  }
}

}  // namespace
}  // namespace shardwise::cpu
