#include "server/call_pool.h"

#include <atomic>
#include <set>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(CallPoolTest, RunsCallsOnItsThreadsAndEveryQueuedOneBeforeItStops) {
  std::atomic<int> ran{0};
  absl::Mutex mu;
  std::set<std::thread::id> threads;
  {
    CallPool pool(/*threads=*/2, /*max_queued=*/1000);
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(pool.TryPost([&] {
        ++ran;
        absl::MutexLock lock(&mu);
        threads.insert(std::this_thread::get_id());
      }));
    }
  }  // the destructor runs what is queued
  EXPECT_EQ(ran, 100);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_LE(threads.size(), 2u);
}

TEST(CallPoolTest, RefusesBeyondTheQueueBoundAndTakesCallsAgainOnceItDrains) {
  absl::Notification release, started;
  CallPool pool(/*threads=*/1, /*max_queued=*/2);
  // The one thread is held by the first call; two more wait; the fourth is refused.
  ASSERT_TRUE(pool.TryPost([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();
  std::atomic<int> ran{0};
  EXPECT_TRUE(pool.TryPost([&] { ++ran; }));
  EXPECT_TRUE(pool.TryPost([&] { ++ran; }));
  EXPECT_FALSE(pool.TryPost([&] { ++ran; }));
  release.Notify();
  absl::Notification drained;
  // Once the queue has room again, calls are taken: this one runs after the two.
  while (!pool.TryPost([&] { drained.Notify(); })) std::this_thread::yield();
  drained.WaitForNotification();
  EXPECT_EQ(ran, 2);
}

}  // namespace
}  // namespace shardwise
