#ifndef SHARDWISE_COMMON_CLOCK_H_
#define SHARDWISE_COMMON_CLOCK_H_

// Time as Shardwise's decisions see it. Every component that decides on time (heartbeat
// timeouts, stalls, re-attach deadlines, retention) reads a Clock it is given, so a test
// advances a SimulatedClock instead of sleeping.
//
// Thread-safety: every clock may be read and (the simulated one) advanced from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardwise {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Wall-clock milliseconds since the Unix epoch: the unit of every timestamp Shardwise
  // stores or sends.
  int64_t NowMs() const { return absl::ToUnixMillis(Now()); }

  // The system's clock; lives for the whole process.
  static const Clock& Real();
};

// A clock that moves only when told to.
class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration by) {
    absl::MutexLock lock(&mu_);
    now_ += by;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

// The wall clock's time when it was made, advanced by a monotonic clock since: a step of
// the wall clock while the process runs (NTP correcting a clock that was far off, a VM's
// resume, an operator's `date`) moves no deadline, so no heartbeat timeout, stall,
// backoff or collective timeout fires (or waits) for it; the times it stamps stay as the
// wall clock read before the step until the process restarts. `steady_now` reads the
// monotonic clock (tests pass their own).
class SteadyAnchoredClock final : public Clock {
 public:
  SteadyAnchoredClock(absl::Time wall_at_start, std::function<absl::Duration()> steady_now)
      : wall_at_start_(wall_at_start),
        steady_now_(std::move(steady_now)),
        steady_at_start_(steady_now_()) {}
  absl::Time Now() const override { return wall_at_start_ + (steady_now_() - steady_at_start_); }

 private:
  const absl::Time wall_at_start_;
  const std::function<absl::Duration()> steady_now_;
  const absl::Duration steady_at_start_;
};

inline const Clock& Clock::Real() {
  static const SteadyAnchoredClock* const clock = new SteadyAnchoredClock(absl::Now(), [] {
    return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  });
  return *clock;
}

// The real clock's NowMs(), for code that only stamps records.
inline int64_t NowMs() { return Clock::Real().NowMs(); }

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_CLOCK_H_
