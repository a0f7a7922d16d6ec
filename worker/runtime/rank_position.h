#ifndef SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_
#define SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_

// Where a rank is in its training step (step, phase, unit, the collective it is inside and
// for how long), written by the training thread and read by the heartbeat thread, which
// sends it to the coordinator. Writes are a few stores under an uncontended mutex, so
// the step pays next to nothing for them.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class RankPosition {
 public:
  explicit RankPosition(int rank = 0) : rank_(rank) {}

  void SetStep(int64_t step) {
    absl::MutexLock lock(&mu_);
    step_ = step;
  }
  void SetPhase(const char* phase, int unit = -1) {
    absl::MutexLock lock(&mu_);
    phase_ = phase;
    unit_ = unit;
  }
  void EnterCollective(const char* name) {
    absl::MutexLock lock(&mu_);
    collective_ = name;
    entered_ = absl::Now();
    ++collectives_;
  }
  void ExitCollective() {
    absl::MutexLock lock(&mu_);
    collective_ = nullptr;
  }

  v1::RankPosition Snapshot() const {
    absl::MutexLock lock(&mu_);
    v1::RankPosition position;
    position.set_rank(rank_);
    position.set_step(step_);
    position.set_phase(phase_);
    position.set_unit(unit_);
    if (collective_ != nullptr) {
      position.set_collective(collective_);
      position.set_collective_ms(absl::ToInt64Milliseconds(absl::Now() - entered_));
    }
    position.set_collectives(collectives_);
    return position;
  }

 private:
  const int rank_;
  mutable absl::Mutex mu_;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  const char* phase_ ABSL_GUARDED_BY(mu_) = "bootstrap";  // string literals only
  int unit_ ABSL_GUARDED_BY(mu_) = -1;
  const char* collective_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Time entered_ ABSL_GUARDED_BY(mu_);
  int64_t collectives_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_
