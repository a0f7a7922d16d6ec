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

// Every epoch stays: ranks that agreed on epoch 2 take epoch 2, though 3 came since.
TEST(MembershipMailbox, KeepsEveryEpochForRanksThatAgreedOnOne) {
  MembershipMailbox mailbox;
  EXPECT_EQ(mailbox.Newest(), 0);
  mailbox.Deliver(Change(2));
  mailbox.Deliver(Change(3));
  mailbox.Deliver(Change(2));  // again, after a coordinator restart
  EXPECT_EQ(mailbox.Newest(), 3);
  auto agreed = mailbox.Epoch(2);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_EQ(agreed->epoch(), 2);
  EXPECT_EQ(mailbox.Epoch(1).status().code(), absl::StatusCode::kNotFound);
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
