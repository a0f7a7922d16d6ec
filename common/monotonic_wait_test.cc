// The waits' semantics. That they time out on the monotonic clock is libstdc++'s (its
// condition variables wait with pthread_cond_clockwait on CLOCK_MONOTONIC); a test here
// cannot step the host's wall clock under the other tests.

#include "common/monotonic_wait.h"

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

using SteadyClock = std::chrono::steady_clock;

TEST(MonotonicNotification, ATimedWaitEndsAtItsTimeoutUnlessNotified) {
  MonotonicNotification notification;
  EXPECT_FALSE(notification.HasBeenNotified());
  const SteadyClock::time_point start = SteadyClock::now();
  EXPECT_FALSE(notification.WaitForNotificationWithTimeout(absl::Milliseconds(30)));
  EXPECT_GE(SteadyClock::now() - start, std::chrono::milliseconds(30));
  EXPECT_FALSE(notification.WaitForNotificationWithTimeout(-absl::Seconds(1)));
}

TEST(MonotonicNotification, ANotifyWakesEveryWaiterAndStays) {
  MonotonicNotification notification;
  bool woken[2] = {false, false};
  std::thread timed(
      [&] { woken[0] = notification.WaitForNotificationWithTimeout(absl::Hours(1)); });
  std::thread untimed([&] {
    notification.WaitForNotification();
    woken[1] = true;
  });
  notification.Notify();
  timed.join();
  untimed.join();
  EXPECT_TRUE(woken[0]);
  EXPECT_TRUE(woken[1]);
  notification.Notify();  // again: no harm
  EXPECT_TRUE(notification.HasBeenNotified());
  EXPECT_TRUE(notification.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  EXPECT_TRUE(notification.WaitForNotificationWithTimeout(absl::InfiniteDuration()));
}

class GuardedFlag {
 public:
  void Set() {
    {
      absl::MutexLock lock(&mu_);
      set_ = true;
    }
    waker_.NotifyAll();
  }
  bool AwaitSet(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return waker_.AwaitWithTimeout(
        mu_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return set_; }, timeout);
  }

 private:
  absl::Mutex mu_;
  bool set_ ABSL_GUARDED_BY(mu_) = false;
  MonotonicWaker waker_;
};

TEST(MonotonicWaker, AWaitEndsWhenItsStateIsChangedOrAtItsTimeout) {
  GuardedFlag flag;
  const SteadyClock::time_point start = SteadyClock::now();
  EXPECT_FALSE(flag.AwaitSet(absl::Milliseconds(30)));
  EXPECT_GE(SteadyClock::now() - start, std::chrono::milliseconds(30));

  bool woken = false;
  std::thread waiter([&] { woken = flag.AwaitSet(absl::InfiniteDuration()); });
  flag.Set();
  waiter.join();
  EXPECT_TRUE(woken);
  EXPECT_TRUE(flag.AwaitSet(absl::ZeroDuration()));  // already set: no wait
}

}  // namespace
}  // namespace shardwise
