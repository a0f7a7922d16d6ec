// The worker's half of a hook switch: a rank accepts only steps it has not started, waits
// at a proposed step for the decision, and applies committed switches from their step on.

#include "worker/train/hook_schedule.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::CommHook Bf16() {
  v1::CommHook hook;
  hook.set_hook(v1::CommHook::BF16_COMPRESS);
  return hook;
}

TEST(HookSchedule, CommittedSwitchesApplyFromTheirStep) {
  HookSchedule schedule;
  schedule.AddCommitted(4, Bf16());
  EXPECT_FALSE(schedule.HookForStep(3, nullptr)->has_value());
  EXPECT_EQ((*schedule.HookForStep(4, nullptr))->hook(), v1::CommHook::BF16_COMPRESS);
  EXPECT_EQ((*schedule.HookForStep(9, nullptr))->hook(), v1::CommHook::BF16_COMPRESS);
}

TEST(HookSchedule, RefusesAStepAlreadyStarted) {
  HookSchedule schedule;
  ASSERT_TRUE(schedule.HookForStep(5, nullptr).ok());
  EXPECT_FALSE(schedule.Propose(1, 5, Bf16()));
  EXPECT_TRUE(schedule.Propose(2, 6, Bf16()));
  EXPECT_EQ(schedule.started_step(), 5);
}

// Whether the training thread is held waiting for a decision by `timeout`.
bool HoldsWithin(const HookSchedule& schedule, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!schedule.holding() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return schedule.holding();
}

TEST(HookSchedule, WaitsAtTheProposedStepForTheDecision) {
  HookSchedule schedule;
  ASSERT_TRUE(schedule.Propose(1, 2, Bf16()));
  ASSERT_TRUE(schedule.HookForStep(1, nullptr).ok());  // before the step: no wait
  absl::Notification reached;
  std::optional<v1::CommHook> hook;
  std::thread training([&] {
    auto result = schedule.HookForStep(2, nullptr);
    hook = *result;
    reached.Notify();
  });
  // Held at step 2: it cannot return while it holds, so nothing is reached until Decide.
  EXPECT_TRUE(HoldsWithin(schedule, absl::Seconds(30)));
  EXPECT_FALSE(reached.HasBeenNotified());
  EXPECT_EQ(schedule.started_step(), 2);
  schedule.Decide(1, /*commit=*/true);
  EXPECT_TRUE(reached.WaitForNotificationWithTimeout(absl::Seconds(5)));
  training.join();
  ASSERT_TRUE(hook.has_value());
  EXPECT_EQ(hook->hook(), v1::CommHook::BF16_COMPRESS);
}

TEST(HookSchedule, AnAbandonedProposalChangesNothing) {
  HookSchedule schedule;
  ASSERT_TRUE(schedule.Propose(1, 3, Bf16()));
  schedule.Decide(1, /*commit=*/false);
  EXPECT_FALSE(schedule.HookForStep(3, nullptr)->has_value());
}

TEST(HookSchedule, AbortEndsTheWait) {
  HookSchedule schedule;
  ASSERT_TRUE(schedule.Propose(1, 0, Bf16()));
  std::atomic<bool> abort{false};
  std::thread aborter([&] {
    EXPECT_TRUE(HoldsWithin(schedule, absl::Seconds(30)));  // the wait began, then the abort
    abort = true;
  });
  auto result = schedule.HookForStep(0, &abort);
  aborter.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace shardwise
