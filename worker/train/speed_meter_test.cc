#include "worker/train/speed_meter.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(SpeedMeter, LeavesTheFirstStepOutOnceASecondEnded) {
  SpeedMeter meter(kStart, 0);
  EXPECT_EQ(meter.steps_per_second(), 0);
  // The first step builds graphs and plans: 5 s.
  meter.StepEnded(kStart + absl::Seconds(5), 1);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 0.2);
  // Then one step every 0.5 s.
  meter.StepEnded(kStart + absl::Seconds(5.5), 2);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 2);
  meter.StepEnded(kStart + absl::Seconds(7), 5);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 2);
  EXPECT_DOUBLE_EQ(meter.tokens_per_second(8192), 16384);
}

TEST(SpeedMeter, CountsFromTheStepsAlreadyDone) {
  // Resumed from a checkpoint at step 40.
  SpeedMeter meter(kStart, 40);
  meter.StepEnded(kStart + absl::Seconds(2), 41);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 0.5);
  meter.StepEnded(kStart + absl::Seconds(3), 45);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 4);
}

TEST(SpeedMeter, KeepsItsFigureWhenNoNewStepEnded) {
  SpeedMeter meter(kStart, 0);
  meter.StepEnded(kStart + absl::Seconds(1), 1);
  meter.StepEnded(kStart + absl::Seconds(2), 3);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 2);
  // A step redone after a recovery: as many steps done as before.
  meter.StepEnded(kStart + absl::Seconds(9), 3);
  EXPECT_DOUBLE_EQ(meter.steps_per_second(), 2);
  // The clock not moving is no speed, not a division by zero.
  SpeedMeter stalled(kStart, 0);
  stalled.StepEnded(kStart, 1);
  EXPECT_EQ(stalled.steps_per_second(), 0);
}

}  // namespace
}  // namespace shardwise
