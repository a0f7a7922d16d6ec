// The communication thread runs tasks one at a time in the order they were enqueued
// (what keeps ranks' collectives paired), reports each task's status to its handle and
// the first failure to Drain, and runs what is still queued before it is destroyed. A
// task in two parts lets its waiters go with its fence once the first part ran, while
// the second still runs. Threads sharing a launch order start their tasks in the order
// they were enqueued across all of them.

#include "worker/comm/comm_thread.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
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
    // Released only once the destructor has cancelled the queued tasks, so they cannot
    // have run whatever the threads' timing.
    releaser = std::thread([&] {
      EXPECT_EQ(queued.back().Wait().code(), absl::StatusCode::kCancelled);
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

using Fence = CommThread::Fence;

struct TestFence : Device::Fence {};

CommThread::Handle EnqueueFenced(CommThread& comm, const CommThread::Fence& fence,
                                 CommThread::CompletionPoll completed) {
  return comm.EnqueueInTwoParts([fence]() -> absl::StatusOr<CommThread::Fence> { return fence; },
                                std::move(completed));
}

TEST(CommThread, WaitStartedReturnsTheFenceWhileCompletionIsStillPolled) {
  CommThread comm;
  const auto fence = std::make_shared<TestFence>();
  absl::Notification release;
  int polls = 0;
  const Device::Fence* polled_after = nullptr;
  auto handle = EnqueueFenced(comm, fence, [&](const Fence& after) -> absl::StatusOr<bool> {
    ++polls;
    polled_after = after.get();
    return release.HasBeenNotified();
  });
  const absl::StatusOr<CommThread::Fence> started = handle.WaitStarted();
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->get(), fence.get());
  release.Notify();
  EXPECT_TRUE(handle.Wait().ok());
  EXPECT_GE(polls, 1);
  EXPECT_EQ(polled_after, fence.get());  // the poll watches the fence its start returned
  EXPECT_TRUE(comm.Drain().ok());
}

// Later tasks start while earlier ones wait for completion: the second task's first part
// runs although the first's completion is withheld until after the second has started.
TEST(CommThread, LaterTasksStartWhileEarlierOnesAwaitCompletion) {
  CommThread comm;
  absl::Notification second_started;
  std::vector<int> completed;
  // Gives up after 10 s (-1): a thread that polled it to completion before starting the
  // second task would get there.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  auto first = EnqueueFenced(comm, nullptr, [&](const Fence&) -> absl::StatusOr<bool> {
    const bool started = second_started.HasBeenNotified();
    if (!started && absl::Now() < give_up) return false;
    completed.push_back(started ? 1 : -1);
    return true;
  });
  auto second = comm.EnqueueInTwoParts(
      [&]() -> absl::StatusOr<CommThread::Fence> {
        second_started.Notify();
        return CommThread::Fence();
      },
      [&](const Fence&) -> absl::StatusOr<bool> {
        completed.push_back(2);
        return true;
      });
  EXPECT_TRUE(second.WaitStarted().ok());
  EXPECT_TRUE(first.Wait().ok());
  EXPECT_TRUE(second.Wait().ok());
  EXPECT_EQ(completed, (std::vector<int>{1, 2}));  // completions are seen oldest first
  EXPECT_TRUE(comm.Drain().ok());
}

TEST(CommThread, AFailedFirstPartReachesWaitStartedAndIsNeverPolled) {
  CommThread comm;
  bool polled = false;
  auto handle = comm.EnqueueInTwoParts(
      []() -> absl::StatusOr<CommThread::Fence> { return absl::AbortedError("not enqueued"); },
      [&polled](const Fence&) -> absl::StatusOr<bool> {
        polled = true;
        return true;
      });
  EXPECT_EQ(handle.WaitStarted().status().message(), "not enqueued");
  EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(polled);
  EXPECT_EQ(comm.Drain().message(), "not enqueued");
}

TEST(CommThread, AFailedCompletionReachesWaitAndDrainNotWaitStarted) {
  CommThread comm;
  auto handle = EnqueueFenced(comm, nullptr, [](const Fence&) -> absl::StatusOr<bool> {
    return absl::DeadlineExceededError("the peer never came");
  });
  EXPECT_TRUE(handle.WaitStarted().ok());
  EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(comm.Drain().message(), "the peer never came");
}

TEST(CommThread, DestructionSeesStartedTasksComplete) {
  std::atomic<int> polls{0};
  CommThread::Handle handle;
  {
    CommThread comm;
    // Completes on its third poll: the destructor keeps polling until then.
    handle = EnqueueFenced(comm, nullptr,
                           [&polls](const Fence&) -> absl::StatusOr<bool> { return ++polls >= 3; });
    ASSERT_TRUE(handle.WaitStarted().ok());
  }
  ASSERT_GE(polls.load(), 3);
  EXPECT_TRUE(handle.Wait().ok());
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

// Two threads sharing a launch order start their tasks in the order they were enqueued
// across both: the second thread's task waits for the first's, which is blocked.
TEST(CommThread, ThreadsSharingALaunchOrderStartTasksInEnqueueOrder) {
  LaunchOrder order;
  CommThread first_lane({}, &order);
  CommThread second_lane({}, &order);
  absl::Mutex mu;
  std::vector<std::string> launched;
  auto launch = [&](const std::string& name) {
    absl::MutexLock lock(&mu);
    launched.push_back(name);
  };
  absl::Notification release;
  first_lane.Enqueue([&] {
    release.WaitForNotification();
    launch("all-gather 1");
    return absl::OkStatus();
  });
  second_lane.Enqueue([&] {
    launch("reduce-scatter 3");
    return absl::OkStatus();
  });
  first_lane.Enqueue([&] {
    launch("all-gather 0");
    return absl::OkStatus();
  });
  // The reduce-scatter's thread waits for its turn (behind the blocked all-gather).
  ASSERT_TRUE(order.AwaitWaiters(1, absl::Seconds(30)));
  release.Notify();
  EXPECT_TRUE(first_lane.Drain().ok());
  EXPECT_TRUE(second_lane.Drain().ok());
  EXPECT_EQ(launched,
            (std::vector<std::string>{"all-gather 1", "reduce-scatter 3", "all-gather 0"}));
}

// A failed launch and a cancelled task give their turns up: the other thread goes on.
TEST(CommThread, FailedAndCancelledTasksReleaseTheirTurns) {
  LaunchOrder order;
  CommThread other_lane({}, &order);
  absl::Notification started, release;
  std::vector<CommThread::Handle> cancelled;
  CommThread::Handle after_failure, after_cancelled;
  std::thread releaser;
  {
    CommThread stopping_lane({}, &order);
    EXPECT_EQ(
        stopping_lane.Enqueue([] { return absl::UnavailableError("peer lost"); }).Wait().code(),
        absl::StatusCode::kUnavailable);
    after_failure = other_lane.Enqueue([] { return absl::OkStatus(); });
    EXPECT_TRUE(after_failure.Wait().ok());
    stopping_lane.Enqueue([&] {
      started.Notify();
      release.WaitForNotification();
      return absl::OkStatus();
    });
    started.WaitForNotification();
    for (int i = 0; i < 3; ++i) {
      cancelled.push_back(stopping_lane.Enqueue([] { return absl::OkStatus(); }));
    }
    after_cancelled = other_lane.Enqueue([] { return absl::OkStatus(); });
    releaser = std::thread([&] {  // once the destructor has cancelled the queued ones
      EXPECT_EQ(cancelled.back().Wait().code(), absl::StatusCode::kCancelled);
      release.Notify();
    });
  }  // the destructor lets the running task finish and cancels the queued ones
  releaser.join();
  for (const auto& handle : cancelled) {
    EXPECT_EQ(handle.Wait().code(), absl::StatusCode::kCancelled);
  }
  EXPECT_TRUE(after_cancelled.Wait().ok());
  EXPECT_TRUE(other_lane.Drain().ok());
}

TEST(CommThread, StartHookRunsOnTheThread) {
  std::thread::id started;
  CommThread comm([&started] { started = std::this_thread::get_id(); });
  std::thread::id ran;
  comm.Enqueue([&ran] {
        ran = std::this_thread::get_id();
        return absl::OkStatus();
      })
      .Wait()
      .IgnoreError();
  EXPECT_EQ(started, ran);
}

}  // namespace
}  // namespace shardwise
