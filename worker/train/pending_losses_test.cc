// PendingLosses keeps each micro-step's loss in its own device slot and reads them all
// at once; LossReadDue says when a rank must read them.

#include "worker/train/pending_losses.h"

#include "gtest/gtest.h"
#include "worker/compute/cpu/cpu_device.h"

namespace shardwise {
namespace {

TEST(PendingLosses, ReadsEveryStepsMicroStepsInOrderAtOnce) {
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  PendingLosses losses(&device, /*interval=*/3, /*micro_steps=*/2);
  EXPECT_EQ(losses.size(), 0);
  // Step 7 with loss scale 4, step 8 with scale 2: a loss scaler's scaled losses.
  *losses.Slot(0) = 4.0;
  *losses.Slot(1) = 8.0;
  losses.EndStep(7, 4.0);
  EXPECT_NE(losses.Slot(0), losses.Slot(1));
  *losses.Slot(0) = 0.5;
  *losses.Slot(1) = 1.5;
  losses.EndStep(8, 2.0);
  EXPECT_EQ(losses.size(), 2);
  EXPECT_FALSE(losses.full());

  auto taken = losses.Take();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 2u);
  EXPECT_EQ((*taken)[0].step, 7);
  EXPECT_DOUBLE_EQ((*taken)[0].local_loss, 1.0 + 2.0);
  EXPECT_EQ((*taken)[1].step, 8);
  EXPECT_DOUBLE_EQ((*taken)[1].local_loss, 0.25 + 0.75);
  EXPECT_EQ(losses.size(), 0);

  // Emptied: the slots are reused from the first.
  for (int64_t step = 9; step < 12; ++step) {
    *losses.Slot(0) = static_cast<double>(step);
    *losses.Slot(1) = 0;
    losses.EndStep(step, 1.0);
  }
  EXPECT_TRUE(losses.full());
  taken = losses.Take();
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(taken->size(), 3u);
  EXPECT_EQ((*taken)[2].step, 11);
  EXPECT_EQ((*taken)[2].local_loss, 11.0);
}

TEST(PendingLosses, TheSlotsAreTheDevicesMemory) {
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  {
    PendingLosses losses(&device, 5, 4);
    EXPECT_EQ(allocator.Stats().live(MemoryCategory::kActivations), 5 * 4 * 8);
  }
  EXPECT_EQ(allocator.Stats().live(MemoryCategory::kActivations), 0);
}

v1::JobSpec Spec(int interval, int64_t steps, int64_t checkpoint_interval) {
  v1::JobSpec spec;
  spec.set_loss_read_interval_steps(interval);
  spec.set_steps(steps);
  spec.mutable_output()->set_checkpoint_interval_steps(checkpoint_interval);
  return spec;
}

TEST(LossReadDue, WhenTheIntervalFillsAtTheLastStepAndBeforeACheckpoint) {
  const v1::JobSpec spec = Spec(4, 10, 0);
  EXPECT_FALSE(LossReadDue(spec, 3, 3));
  EXPECT_TRUE(LossReadDue(spec, 4, 4));
  EXPECT_FALSE(LossReadDue(spec, 9, 1));
  EXPECT_TRUE(LossReadDue(spec, 10, 2));   // the last step, the interval not full
  EXPECT_FALSE(LossReadDue(spec, 10, 0));  // nothing pending

  const v1::JobSpec checkpointing = Spec(4, 10, 3);
  EXPECT_TRUE(LossReadDue(checkpointing, 3, 3));
  EXPECT_FALSE(LossReadDue(checkpointing, 5, 2));
  EXPECT_TRUE(LossReadDue(checkpointing, 6, 3));

  // Unset (0) and 1: every step.
  EXPECT_TRUE(LossReadDue(Spec(0, 10, 0), 1, 1));
  EXPECT_TRUE(LossReadDue(Spec(1, 10, 0), 5, 1));
}

}  // namespace
}  // namespace shardwise
