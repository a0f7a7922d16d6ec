#include "worker/train/membership_mailbox.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::MembershipChange Change(int32_t epoch) {
  v1::MembershipChange change;
  change.set_epoch(epoch);
  change.add_live_ranks(0);
  return change;
}

// A newer epoch wakes a waiter; an older or repeated one changes nothing.
TEST(MembershipMailbox, ANewerEpochWakesTheWaiter) {
  MembershipMailbox mailbox;
  std::thread session([&] { mailbox.Deliver(Change(1)); });
  auto change = mailbox.WaitForEpochAbove(0, absl::Seconds(30), nullptr);
  session.join();
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->epoch(), 1);
  mailbox.Deliver(Change(0));
  change = mailbox.WaitForEpochAbove(0, absl::Seconds(30), nullptr);
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->epoch(), 1);
  EXPECT_EQ(mailbox.WaitForEpochAbove(1, absl::Milliseconds(1), nullptr).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(MembershipMailbox, AWaitEndsAtItsDeadlineOrAnAbort) {
  MembershipMailbox mailbox;
  EXPECT_EQ(mailbox.WaitForEpochAbove(0, absl::Milliseconds(1), nullptr).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  const std::atomic<bool> abort{true};
  EXPECT_EQ(mailbox.WaitForEpochAbove(0, absl::Seconds(30), &abort).status().code(),
            absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace shardwise
