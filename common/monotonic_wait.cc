#include "common/monotonic_wait.h"

#include <algorithm>
#include <chrono>

namespace shardwise {
namespace {

// A wait's timeout for a monotonic clock's wait_for: non-negative, and bounded so that
// now + timeout cannot overflow the clock's time points (an infinite timeout waits a
// century).
std::chrono::nanoseconds ChronoTimeout(absl::Duration timeout) {
  constexpr absl::Duration kLongest = absl::Hours(24 * 365 * 100);
  return absl::ToChronoNanoseconds(std::clamp(timeout, absl::ZeroDuration(), kLongest));
}

// An absl::Mutex as the BasicLockable a condition_variable_any releases while it waits
// and takes again before it returns: the caller holds it throughout, as far as the
// thread-safety analysis can tell.
class HeldMutex {
 public:
  explicit HeldMutex(absl::Mutex& mu) : mu_(mu) {}
  void lock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Lock(); }
  void unlock() ABSL_NO_THREAD_SAFETY_ANALYSIS { mu_.Unlock(); }

 private:
  absl::Mutex& mu_;
};

}  // namespace

void MonotonicNotification::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    notified_.store(true, std::memory_order_release);
  }
  changed_.notify_all();
}

void MonotonicNotification::WaitForNotification() const {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [this] { return HasBeenNotified(); });
}

bool MonotonicNotification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, ChronoTimeout(timeout), [this] { return HasBeenNotified(); });
}

bool MonotonicWaker::AwaitWithTimeout(absl::Mutex& mu, const std::function<bool()>& ready,
                                      absl::Duration timeout) {
  HeldMutex held(mu);
  return changed_.wait_for(held, ChronoTimeout(timeout), ready);
}

}  // namespace shardwise
