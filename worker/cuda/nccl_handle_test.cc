// NcclHandle on a stand-in communicator (no NCCL call is made: the calls are the test's
// and the abort function is the test's), so it runs without a GPU.

#include "worker/cuda/nccl_handle.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace shardwise::cuda {
namespace {

ncclComm_t StandIn() {
  static int communicator = 0;
  return reinterpret_cast<ncclComm_t>(&communicator);
}

std::atomic<int> aborts{0};
ncclComm_t aborted_comm = nullptr;

ncclResult_t CountAbort(ncclComm_t comm) {
  aborted_comm = comm;
  aborts.fetch_add(1);
  return ncclSuccess;
}

class NcclHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    aborts = 0;
    aborted_comm = nullptr;
  }
};

TEST_F(NcclHandleTest, CallsReachTheCommunicatorUntilItIsAbortedOnce) {
  NcclHandle handle(StandIn(), &CountAbort);
  ncclComm_t seen = nullptr;
  EXPECT_EQ(handle.Call([&](ncclComm_t comm) {
    seen = comm;
    return ncclInProgress;
  }),
            ncclInProgress);
  EXPECT_EQ(seen, StandIn());
  EXPECT_FALSE(handle.aborted());
  EXPECT_TRUE(handle.Abort());
  EXPECT_FALSE(handle.Abort());  // a second abort changes nothing
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_EQ(aborted_comm, StandIn());
  EXPECT_TRUE(handle.aborted());
  bool called = false;
  EXPECT_EQ(handle.Call(
                [&](ncclComm_t) {
                  called = true;
                  return ncclSuccess;
                },
                ncclRemoteError),
            ncclRemoteError);
  EXPECT_FALSE(called);
  EXPECT_EQ(handle.Release(), nullptr);  // nothing left to destroy
}

std::atomic<bool> owner_in_call{false};
std::atomic<bool> aborted_during_a_call{false};

ncclResult_t AbortOutsideCalls(ncclComm_t comm) {
  if (owner_in_call.load()) aborted_during_a_call = true;
  return CountAbort(comm);
}

// An abort from another thread waits for the owner's call in progress (NCCL allows one
// thread at a time on a communicator), and for nothing else the owner does: the owner
// then blocks until the abort returned, as on a stream that waits for a collective whose
// peer is gone, and the test would hang if the abort needed it.
TEST_F(NcclHandleTest, AnAbortFromAnotherThreadWaitsForTheCallInProgressOnly) {
  NcclHandle handle(StandIn(), &AbortOutsideCalls);
  absl::Notification in_call, watcher_aborting, abort_returned;
  std::thread owner([&] {
    handle.Call([&](ncclComm_t) {
      owner_in_call = true;
      in_call.Notify();
      watcher_aborting.WaitForNotification();
      owner_in_call = false;
      return ncclSuccess;
    });
    EXPECT_TRUE(abort_returned.WaitForNotificationWithTimeout(absl::Seconds(60)))
        << "the abort waited for the owner";
  });
  in_call.WaitForNotification();
  std::thread watcher([&] {
    watcher_aborting.Notify();
    handle.Abort();
    abort_returned.Notify();
  });
  watcher.join();
  owner.join();
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_FALSE(aborted_during_a_call.load()) << "aborted while the owner's call was in NCCL";
}

TEST_F(NcclHandleTest, AnAbortDuringAGroupHappensWhenTheGroupCloses) {
  NcclHandle handle(StandIn(), &CountAbort);
  handle.GroupOpened();
  EXPECT_TRUE(handle.Abort());
  EXPECT_EQ(aborts.load(), 0) << "the group's calls still point at the communicator";
  EXPECT_TRUE(handle.aborted());
  bool called = false;
  handle.Call([&](ncclComm_t) {
    called = true;
    return ncclSuccess;
  });
  EXPECT_FALSE(called) << "a call after the abort was asked for";
  handle.GroupClosed();
  EXPECT_EQ(aborts.load(), 1);
  handle.GroupOpened();
  handle.GroupClosed();
  EXPECT_EQ(aborts.load(), 1);
}

TEST_F(NcclHandleTest, AReleasedCommunicatorIsTheOwnersAndCannotBeAborted) {
  NcclHandle handle(StandIn(), &CountAbort);
  EXPECT_EQ(handle.Release(), StandIn());
  handle.Abort();
  EXPECT_EQ(aborts.load(), 0);
  EXPECT_EQ(handle.Release(), nullptr);
}

TEST_F(NcclHandleTest, ReleasingDuringAPendingAbortAbortsFirst) {
  NcclHandle handle(StandIn(), &CountAbort);
  handle.GroupOpened();
  handle.Abort();
  EXPECT_EQ(handle.Release(), nullptr);
  EXPECT_EQ(aborts.load(), 1);
}

}  // namespace
}  // namespace shardwise::cuda
