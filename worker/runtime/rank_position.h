#ifndef SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_
#define SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_

// Where a rank is in its training step (step, phase, unit, the collectives it is inside and
// for how long, per thread), written by the training and communication threads and read
// by the heartbeat thread, which sends it to the coordinator. Writes are a few stores under an
// uncontended mutex, so the step pays next to nothing for them.
//
// Thread-safety: thread-safe.

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class RankPosition {
 public:
  explicit RankPosition(int rank = 0) : rank_(rank) {}

  // Told the step and the name of every phase the rank enters and every collective it
  // enters, on the thread that enters it (tests' fault injection). Set before training.
  using Observer = std::function<void(int64_t step, const char* point)>;
  void set_observer(Observer observer) { observer_ = std::move(observer); }

  // Counts collectives from 0 again, as of membership epoch `epoch`: called by every rank
  // of the epoch at the same point (its first step's start), so that a replacement's
  // counts and those of the ranks that trained on compare.
  void StartEpoch(int32_t epoch) {
    absl::MutexLock lock(&mu_);
    epoch_ = epoch;
    collectives_ = 0;
    for (Lane& lane : lanes_) lane.collectives = 0;
  }
  void SetStep(int64_t step) {
    absl::MutexLock lock(&mu_);
    step_ = step;
  }
  void SetPhase(const char* phase, int unit = -1) {
    int64_t step;
    {
      absl::MutexLock lock(&mu_);
      phase_ = phase;
      unit_ = unit;
      step = step_;
    }
    if (observer_) observer_(step, phase);
  }
  // A collective entered and left on `lane` (the calling thread's timeline lane); a rank
  // may be inside one collective per lane at once.
  void EnterCollective(const char* name, int lane) {
    int64_t step;
    {
      absl::MutexLock lock(&mu_);
      Lane& l = lanes_[Clamp(lane)];
      l.collective = name;
      l.entered = Clock::Real().Now();
      ++l.collectives;
      ++collectives_;
      step = step_;
    }
    if (observer_) observer_(step, name);
  }
  // Waiting on `lane`, since `since`, for collectives it already entered to complete
  // (those that return once enqueued: communicator.h): shown as `name`, not counted as
  // another collective, so ranks' counts still pair up.
  void AwaitCollectives(const char* name, int lane, absl::Time since) {
    absl::MutexLock lock(&mu_);
    Lane& l = lanes_[Clamp(lane)];
    if (l.collective != nullptr) return;
    l.collective = name;
    l.entered = since;
  }
  void ExitCollective(int lane) {
    absl::MutexLock lock(&mu_);
    lanes_[Clamp(lane)].collective = nullptr;
  }

  v1::RankPosition Snapshot() const {
    absl::MutexLock lock(&mu_);
    v1::RankPosition position;
    position.set_rank(rank_);
    position.set_step(step_);
    position.set_phase(phase_);
    position.set_unit(unit_);
    const Lane* longest = nullptr;
    for (const Lane& lane : lanes_) {
      position.add_lane_collectives(lane.collectives);
      if (lane.collective != nullptr && (longest == nullptr || lane.entered < longest->entered)) {
        longest = &lane;
      }
    }
    if (longest != nullptr) {
      position.set_collective(longest->collective);
      position.set_collective_ms(absl::ToInt64Milliseconds(Clock::Real().Now() - longest->entered));
      position.set_lane(static_cast<int32_t>(longest - lanes_));
    }
    position.set_collectives(collectives_);
    position.set_epoch(epoch_);
    return position;
  }

  static constexpr int kLanes = 3;

 private:
  const int rank_;
  Observer observer_;
  mutable absl::Mutex mu_;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  const char* phase_ ABSL_GUARDED_BY(mu_) = "bootstrap";  // string literals only
  int unit_ ABSL_GUARDED_BY(mu_) = -1;
  struct Lane {
    const char* collective = nullptr;  // string literals only; null outside collectives
    absl::Time entered;
    int64_t collectives = 0;
  };
  static int Clamp(int lane) { return lane < 0 ? 0 : lane >= kLanes ? kLanes - 1 : lane; }
  Lane lanes_[kLanes] ABSL_GUARDED_BY(mu_);
  int64_t collectives_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_RANK_POSITION_H_
