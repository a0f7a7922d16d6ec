// The communication thread runs tasks one at a time in the order they were enqueued
// (what keeps ranks' collectives paired), reports each task's status to its handle and
// the first failure to Drain, and runs what is still queued before it is destroyed. A
// task in two parts lets its waiters go with its fence once the first part ran, while
// the second still runs.

#include "worker/comm/comm_thread.h"

#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(CommThread, RunsTasksInOrderOffTheCallingThread) {
  CommThread comm;
  std::vector<int> ran;
  std::thread::id worker;
  absl::Notification release;
  // The first task blocks until released: the rest must queue behind it, in order.
  comm.Enqueue([&] {
    worker = std::this_thread::get_id();
    release.WaitForNotification();
    ran.push_back(0);
    return absl::OkStatus();
  });
  std::vector<CommThread::Handle> handles;
  for (int i = 1; i <= 5; ++i) {
    handles.push_back(comm.Enqueue([&ran, i] {
      ran.push_back(i);
      return absl::OkStatus();
    }));
  }
  release.Notify();
  EXPECT_TRUE(handles.back().Wait().ok());
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_TRUE(comm.Drain().ok());
}

TEST(CommThread, FailuresReachTheirHandleAndDrain) {
  CommThread comm;
  auto ok = comm.Enqueue([] { return absl::OkStatus(); });
  auto failed = comm.Enqueue([] { return absl::DeadlineExceededError("peer gone"); });
  auto later = comm.Enqueue([] { return absl::OkStatus(); });
  EXPECT_TRUE(ok.Wait().ok());
  EXPECT_EQ(failed.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(later.Wait().ok());  // later tasks still run
  EXPECT_EQ(comm.Drain().message(), "peer gone");
  EXPECT_TRUE(comm.Drain().ok());  // reported once
}

TEST(CommThread, DestructionFinishesTheRunningTaskAndCancelsTheQueued) {
  absl::Notification started, release;
  bool first_finished = false;
  int later_ran = 0;
  std::vector<CommThread::Handle> queued;
  std::thread releaser;
  {
    CommThread comm;
    comm.Enqueue([&] {
      started.Notify();
      release.WaitForNotification();
      first_finished = true;
      return absl::OkStatus();
    });
    started.WaitForNotification();
    for (int i = 0; i < 10; ++i) {
      queued.push_back(comm.Enqueue([&later_ran] {
        ++later_ran;
        return absl::OkStatus();
      }));
    }
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      release.Notify();
    });
  }  // the destructor waits for the running task
  releaser.join();
  EXPECT_TRUE(first_finished);
  EXPECT_EQ(later_ran, 0);
  for (const auto& handle : queued) {
    EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kCancelled);
    EXPECT_EQ(handle.WaitStarted().status().code(), absl::StatusCode::kCancelled);
  }
}

struct TestFence : Device::Fence {};

TEST(CommThread, WaitStartedReturnsTheFenceWhileTheSecondPartStillRuns) {
  CommThread comm;
  const auto fence = std::make_shared<TestFence>();
  absl::Notification release;
  bool released_in_time = false;
  auto handle = comm.EnqueueInTwoParts(
      [fence]() -> absl::StatusOr<CommThread::Fence> { return fence; },
      [&] {
        // Released only after WaitStarted returned: were WaitStarted to wait for this
        // part, it would time out here, unreleased.
        released_in_time = release.WaitForNotificationWithTimeout(absl::Seconds(30));
        return absl::OkStatus();
      });
  const absl::StatusOr<CommThread::Fence> started = handle.WaitStarted();
  release.Notify();
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->get(), fence.get());
  EXPECT_TRUE(handle.Wait().ok());
  EXPECT_TRUE(released_in_time);
  EXPECT_TRUE(comm.Drain().ok());
}

TEST(CommThread, AFailedFirstPartReachesWaitStartedAndSkipsTheSecond) {
  CommThread comm;
  bool finished = false;
  auto handle = comm.EnqueueInTwoParts(
      []() -> absl::StatusOr<CommThread::Fence> { return absl::AbortedError("not enqueued"); },
      [&finished] {
        finished = true;
        return absl::OkStatus();
      });
  EXPECT_EQ(handle.WaitStarted().status().message(), "not enqueued");
  EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(finished);
  EXPECT_EQ(comm.Drain().message(), "not enqueued");
}

TEST(CommThread, AFailedSecondPartReachesWaitAndDrainNotWaitStarted) {
  CommThread comm;
  auto handle = comm.EnqueueInTwoParts(
      []() -> absl::StatusOr<CommThread::Fence> { return CommThread::Fence(); },
      [] { return absl::DeadlineExceededError("the peer never came"); });
  EXPECT_TRUE(handle.WaitStarted().ok());
  EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(comm.Drain().message(), "the peer never came");
}

TEST(CommThread, ATaskInOnePartHasStartedOnceItRan) {
  CommThread comm;
  bool ran = false;
  auto handle = comm.Enqueue([&ran] {
    ran = true;
    return absl::OkStatus();
  });
  const absl::StatusOr<CommThread::Fence> started = handle.WaitStarted();
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->get(), nullptr);
  EXPECT_TRUE(ran);
  auto failed = comm.Enqueue([] { return absl::InternalError("bad"); });
  EXPECT_EQ(failed.WaitStarted().status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(comm.Drain().code(), absl::StatusCode::kInternal);
}

TEST(CommThread, StartHookRunsOnTheThread) {
  std::thread::id started;
  CommThread comm([&started] { started = std::this_thread::get_id(); });
  std::thread::id ran;
  comm.Enqueue([&ran] {
    ran = std::this_thread::get_id();
    return absl::OkStatus();
  }).Wait().IgnoreError();
  EXPECT_EQ(started, ran);
}

}  // namespace
}  // namespace shardwise
