#ifndef SHARDWISE_COMMON_CLOCK_H_
#define SHARDWISE_COMMON_CLOCK_H_

// Time as Shardwise's decisions see it. Every component that decides on time (heartbeat
// timeouts, stalls, re-attach deadlines, retention) reads a Clock it is given, so a test
// advances a SimulatedClock instead of sleeping.
//
// Thread-safety: both clocks may be read and (the simulated one) advanced from any thread.

#include <cstdint>

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

inline const Clock& Clock::Real() {
  class RealClock final : public Clock {
   public:
    absl::Time Now() const override { return absl::Now(); }
  };
  static const RealClock* const clock = new RealClock;
  return *clock;
}

// The real clock's NowMs(), for code that only stamps records.
inline int64_t NowMs() { return Clock::Real().NowMs(); }

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_CLOCK_H_
