#include "worker/train/injected_faults.h"

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::ExecutionOrder Order() {
  v1::ExecutionOrder order;
  for (int unit : {0, 1, 2}) {
    order.add_pre_forward(unit);
    order.add_post_forward(unit);
  }
  return order;
}

TEST(InjectedFaults, NoneForAnEmptyFlag) {
  auto faults = ParseInjectedFaults("");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_EQ(*faults, nullptr);
}

TEST(InjectedFaults, ReversesTheUnitOrderFromTheStepNamed) {
  auto faults = ParseInjectedFaults("unit_order_reversed_from=3");
  ASSERT_TRUE(faults.ok()) << faults.status();
  v1::ExecutionOrder before = Order(), from = Order();
  (*faults)->AlterExecutionOrder(2, &before);
  (*faults)->AlterExecutionOrder(3, &from);
  EXPECT_EQ(before.pre_forward(0), 0);
  EXPECT_EQ(from.pre_forward(0), 2);
  EXPECT_EQ(from.post_forward(2), 0);
}

TEST(InjectedFaults, ReversesEveryStepWithoutAStep) {
  auto faults = ParseInjectedFaults("unit_order_reversed");
  ASSERT_TRUE(faults.ok()) << faults.status();
  v1::ExecutionOrder order = Order();
  (*faults)->AlterExecutionOrder(0, &order);
  EXPECT_EQ(order.pre_forward(0), 2);
}

// The kill itself is exercised by tests/fault_tolerance_test on real processes; here, a
// forked child takes it at the named point only.
TEST(InjectedFaults, KillsTheProcessAtTheNamedStepAndPointOnly) {
  auto faults = ParseInjectedFaults("sigkill_at=7:commit vote");
  ASSERT_TRUE(faults.ok()) << faults.status();
  (*faults)->AtPoint(6, "commit vote");
  (*faults)->AtPoint(7, "optimizer");
  (*faults)->AtPoint(8, "commit vote");
  EXPECT_EXIT((*faults)->AtPoint(7, "commit vote"), ::testing::KilledBySignal(SIGKILL), "");
}

TEST(InjectedFaults, AnyStepKillsAtTheFirstEntryOfThePoint) {
  auto faults = ParseInjectedFaults("sigkill_at=any:sending optimizer state");
  ASSERT_TRUE(faults.ok()) << faults.status();
  (*faults)->AtPoint(41, "sending parameters");
  EXPECT_EXIT((*faults)->AtPoint(41, "sending optimizer state"), ::testing::KilledBySignal(SIGKILL),
              "");
}

TEST(InjectedFaults, FailsThePartNamedAfterItsStepsOnce) {
  auto faults = ParseInjectedFaults("fail_after=40:evaluation,leave_after=90");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_TRUE((*faults)->AfterPart(40, "checkpoint").ok());
  EXPECT_TRUE((*faults)->AfterPart(30, "evaluation").ok());
  const absl::Status failed = (*faults)->AfterPart(40, "evaluation");
  EXPECT_TRUE(absl::IsUnavailable(failed)) << failed;
  EXPECT_EQ(failed.message(), "fault injection: the evaluation after 40 steps failed here");
  EXPECT_TRUE((*faults)->AfterPart(40, "evaluation").ok()) << "failed a second time";
}

TEST(InjectedFaults, PausesOnceAtThePointNamed) {
  std::vector<absl::Duration> pauses;  // each pause it took, in order
  auto faults = ParseInjectedFaults("pause_at=any:receiving parameters:200",
                                    [&](absl::Duration pause) { pauses.push_back(pause); });
  ASSERT_TRUE(faults.ok()) << faults.status();
  (*faults)->AtPoint(0, "receiving optimizer state");  // another point: no pause
  EXPECT_TRUE(pauses.empty());
  (*faults)->AtPoint(0, "receiving parameters");
  EXPECT_EQ(pauses, std::vector<absl::Duration>{absl::Milliseconds(200)});
  (*faults)->AtPoint(1, "receiving parameters");  // once only
  EXPECT_EQ(pauses.size(), 1u);
}

TEST(InjectedFaults, ThrowsWhatAThreadThatCannotStartThrowsOnceAtThePointNamed) {
  auto faults = ParseInjectedFaults("no_thread_at=2:forward");
  ASSERT_TRUE(faults.ok()) << faults.status();
  (*faults)->AtPoint(1, "forward");
  (*faults)->AtPoint(2, "optimizer");
  try {
    (*faults)->AtPoint(2, "forward");
    ADD_FAILURE() << "nothing thrown";
  } catch (const std::system_error& failure) {
    EXPECT_EQ(failure.code(), std::errc::resource_unavailable_try_again);
  }
  (*faults)->AtPoint(2, "forward");  // once
}

TEST(InjectedFaults, LeavesFromTheStepNamed) {
  auto faults = ParseInjectedFaults("leave_after=38");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_FALSE((*faults)->LeaveAfter(37));
  EXPECT_TRUE((*faults)->LeaveAfter(38));
  EXPECT_TRUE((*faults)->LeaveAfter(39));
}

TEST(InjectedFaults, HoldsOnceAtThePointNamedUntilTheFileExists) {
  const std::string file = testing::ScratchPath("release:at 4");
  auto faults = ParseInjectedFaults("hold_at=4:forward:" + file);
  ASSERT_TRUE(faults.ok()) << faults.status();
  (*faults)->AtPoint(3, "forward");   // another step
  (*faults)->AtPoint(4, "backward");  // another point
  std::atomic<bool> released{false};
  std::thread held([&] {
    (*faults)->AtPoint(4, "forward");
    released = true;
  });
  EXPECT_FALSE(released) << "returned before " << file << " existed";
  std::ofstream(file).put('\n');
  held.join();
  EXPECT_TRUE(released);
  std::filesystem::remove(file);
  (*faults)->AtPoint(4, "forward");  // once: not held again
}

TEST(InjectedFaults, TakesSeveralFaultsJoinedByCommas) {
  auto faults = ParseInjectedFaults("leave_after=5,sigkill_at=7:forward");
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_FALSE((*faults)->LeaveAfter(4));
  EXPECT_TRUE((*faults)->LeaveAfter(5));
  (*faults)->AtPoint(6, "forward");
  EXPECT_EXIT((*faults)->AtPoint(7, "forward"), ::testing::KilledBySignal(SIGKILL), "");
  auto bad = ParseInjectedFaults("leave_after=5,drop_everything");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'drop_everything'"), std::string::npos) << bad.status();
}

TEST(InjectedFaults, RefusesAnUnknownFaultNamingIt) {
  for (const char* text :
       {"drop_everything", "unit_order_reversed_from=", "unit_order_reversed_from=x",
        "sigkill_at=", "sigkill_at=3", "sigkill_at=3:", "sigkill_at=-1:forward",
        "sigkill_at=x:forward", "sigkill_at=any:", "pause_at=any:x", "pause_at=any:x:0",
        "pause_at=x:y:5", "hold_at=any:forward",
        "hold_at=3:forward:", "leave_after=", "leave_after=-2", "leave_after=5,"}) {
    auto faults = ParseInjectedFaults(text);
    EXPECT_EQ(faults.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(faults.status().message().find(text), std::string::npos) << faults.status();
  }
}

}  // namespace
}  // namespace shardwise
