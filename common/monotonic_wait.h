#ifndef SHARDWISE_COMMON_MONOTONIC_WAIT_H_
#define SHARDWISE_COMMON_MONOTONIC_WAIT_H_

// Timed waits on the monotonic clock. This Abseil's timed waits
// (Mutex::AwaitWithTimeout, Notification::WaitForNotificationWithTimeout, CondVar) end at a
// wall-clock time (a futex on CLOCK_REALTIME): a clock stepped back (NTP correcting a
// large offset, a virtual machine resumed) holds such a wait that much longer. Where
// the timeout is a loop's tick (the coordinator's periodic checks, a poll of collectives
// in flight), the loop would stall for as long. libstdc++'s condition variables wait on
// CLOCK_MONOTONIC, which no one steps; these waits use them.
//
// A wait for a condition that another thread makes true and wakes (absl::Condition) is
// not affected: only its timeout is.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardwise {

// As absl::Notification, its timed wait on the monotonic clock; Notify() may be called
// more than once.
class MonotonicNotification {
 public:
  MonotonicNotification() = default;
  MonotonicNotification(const MonotonicNotification&) = delete;
  MonotonicNotification& operator=(const MonotonicNotification&) = delete;

  void Notify();
  bool HasBeenNotified() const { return notified_.load(std::memory_order_acquire); }
  void WaitForNotification() const;
  // Whether it was notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const;

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::atomic<bool> notified_{false};
};

// Wakes a thread that waits, holding an absl::Mutex, until a predicate over what the
// mutex guards holds or a timeout passes on the monotonic clock. Whoever changes that
// state, under the mutex, calls NotifyAll() (after, holding the mutex or not).
class MonotonicWaker {
 public:
  void NotifyAll() { changed_.notify_all(); }
  // With `mu` held: waits until `ready()` (evaluated with `mu` held) or `timeout` has
  // passed; returns ready(). `mu` is released while waiting.
  bool AwaitWithTimeout(absl::Mutex& mu, const std::function<bool()>& ready, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 private:
  std::condition_variable_any changed_;
};

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_MONOTONIC_WAIT_H_
