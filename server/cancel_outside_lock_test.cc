#include "server/cancel_outside_lock.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(CancelOutsideLock, AFinishDuringTheCancelIsHeldUntilItsEnd) {
  CancelOutsideLock cancel;
  EXPECT_FALSE(cancel.HoldsFinish());  // no cancel: the owner finishes at once
  ASSERT_TRUE(cancel.Begin());
  EXPECT_FALSE(cancel.Begin());       // one at a time: a second caller leaves it be
  EXPECT_TRUE(cancel.HoldsFinish());  // a reaction's Finish waits
  EXPECT_TRUE(cancel.End());          // and the canceller does it
  EXPECT_FALSE(cancel.HoldsFinish());
}

TEST(CancelOutsideLock, ACancelNothingFinishedDuringLeavesNothingToDo) {
  CancelOutsideLock cancel;
  ASSERT_TRUE(cancel.Begin());
  EXPECT_FALSE(cancel.End());
  ASSERT_TRUE(cancel.Begin());  // another may start later
  EXPECT_TRUE(cancel.HoldsFinish());
  EXPECT_TRUE(cancel.End());
  EXPECT_FALSE(cancel.End());  // told once
}

}  // namespace
}  // namespace shardwise
