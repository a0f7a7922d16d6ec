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
  EXPECT_FALSE(reached.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
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
    absl::SleepFor(absl::Milliseconds(150));
    abort = true;
  });
  auto result = schedule.HookForStep(0, &abort);
  aborter.join();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace shardwise
