// The real clock runs on the monotonic clock from the wall clock's time at its start: a
// wall-clock step while the process runs moves none of its deadlines.

#include "common/clock.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(SteadyAnchoredClock, StartsAtTheWallTimeAndMovesOnlyWithTheMonotonicClock) {
  const absl::Time wall = absl::FromUnixSeconds(1'800'000'000);
  absl::Duration steady = absl::Hours(5);  // since the host booted
  const SteadyAnchoredClock clock(wall, [&steady] { return steady; });
  EXPECT_EQ(clock.Now(), wall);
  steady += absl::Seconds(3);
  EXPECT_EQ(clock.Now(), wall + absl::Seconds(3));
  EXPECT_EQ(clock.NowMs(), absl::ToUnixMillis(wall) + 3000);
}

// The process's real clock: the wall clock's time when first read, within the time the
// test takes, and never behind itself.
TEST(SteadyAnchoredClock, TheRealClockStartsAtTheWallClocksTime) {
  const absl::Time before = absl::Now();
  const absl::Time first = Clock::Real().Now();
  EXPECT_LT(absl::AbsDuration(first - before), absl::Seconds(60));
  EXPECT_GE(Clock::Real().Now(), first);
}

}  // namespace
}  // namespace shardwise
