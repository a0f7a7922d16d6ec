// Two-part collective tasks (fenced_tasks.h) after a failure: the collectives they
// enqueued settle (the completion poll answers true or an error) before the task reports,
// so no caller frees buffers a collective still uses and none is left in flight unwatched.
// The polls are scripted: a collective that stays in flight, then fails, is an NCCL
// failure this machine cannot produce.

#include "worker/fsdp/fenced_tasks.h"

#include <atomic>
#include <new>

#include "gtest/gtest.h"
#include "worker/comm/comm_thread.h"
#include "worker/compute/cpu/cpu_device.h"

namespace shardwise::fsdp {
namespace {

// A completion poll that answers "in flight" `pending` times, then `then`; counts its calls.
struct ScriptedPoll {
  absl::StatusOr<bool> operator()() {
    const int call = calls->fetch_add(1);
    if (call < pending) return false;
    return then;
  }
  std::atomic<int>* calls;
  int pending;
  absl::StatusOr<bool> then;
};

class FencedTasksTest : public ::testing::Test {
 protected:
  CpuCachingAllocator allocator_;
  CpuDevice device_{&allocator_};
  CommThread lane_;
  std::atomic<int> polls_{0};
};

TEST_F(FencedTasksTest, AFailedStartWaitsForItsCollectivesToSettle) {
  CommThread::Handle task = EnqueueAfterFenceInTwoParts(
      &device_, lane_, [] { return absl::UnavailableError("the replicate all-reduce failed"); },
      ScriptedPoll{&polls_, 3, true});
  const absl::Status status = task.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  // Three answers of "in flight", then the one that settled them, all before the report.
  EXPECT_EQ(polls_.load(), 4);
}

TEST_F(FencedTasksTest, AnAllocationFailureInTheStartLetsTheCollectivesSettleToo) {
  // The device's allocator throws; a collective may already be enqueued by then.
  CommThread::Handle task = EnqueueAfterFenceInTwoParts(
      &device_, lane_, []() -> absl::Status { throw std::bad_alloc(); },
      ScriptedPoll{&polls_, 2, true});
  const absl::Status status = task.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_EQ(polls_.load(), 3);
}

TEST_F(FencedTasksTest, AFailedStartReportsItsOwnErrorOverTheCollectives) {
  CommThread::Handle task = EnqueueAfterFenceInTwoParts(
      &device_, lane_, [] { return absl::InternalError("the start failed"); },
      ScriptedPoll{&polls_, 1, absl::DeadlineExceededError("the reduce-scatter timed out")});
  const absl::Status status = task.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_EQ(polls_.load(), 2);
}

TEST_F(FencedTasksTest, ACollectiveThatFailsFailsTheTaskOnceSettled) {
  CommThread::Handle task = EnqueueAfterFenceInTwoParts(
      &device_, lane_, [] { return absl::OkStatus(); },
      ScriptedPoll{&polls_, 2, absl::UnavailableError("peer lost")});
  const absl::StatusOr<CommThread::Fence> started = task.WaitStarted();
  EXPECT_TRUE(started.ok()) << started.status();
  const absl::Status status = task.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_EQ(lane_.Drain().code(), absl::StatusCode::kUnavailable);
}

TEST_F(FencedTasksTest, ATaskWhoseCollectivesCompleteSucceeds) {
  CommThread::Handle task = EnqueueAfterFenceInTwoParts(
      &device_, lane_, [] { return absl::OkStatus(); }, ScriptedPoll{&polls_, 2, true});
  EXPECT_TRUE(task.Wait().ok());
  EXPECT_TRUE(lane_.Drain().ok());
  EXPECT_GE(polls_.load(), 3);
}

}  // namespace
}  // namespace shardwise::fsdp
