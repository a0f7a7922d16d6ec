#ifndef SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_
#define SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_

// A fault-tolerant attempt's membership changes (MembershipChange), delivered from the
// session thread while the rank trains; every epoch is kept (a few). A rank whose
// collective failed waits here for the change that says who trains on
// (worker/train/membership_moves.cc, Recover); the ranks move to a change that adds ranks (a
// replacement joining) once each holds it, and each then takes that very epoch.
//
// Thread-safety: Deliver from the session thread, WaitForEpochAbove from the training
// thread.

#include <atomic>
#include <cstdint>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/monotonic_wait.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class MembershipMailbox {
 public:
  void Deliver(const v1::MembershipChange& change) {
    absl::MutexLock lock(&mu_);
    changes_.emplace(change.epoch(), change);
    delivered_.NotifyAll();
  }

  // The newest epoch delivered; 0 if none.
  int32_t Newest() {
    absl::MutexLock lock(&mu_);
    return changes_.empty() ? 0 : changes_.rbegin()->first;
  }

  // The change of `epoch`; NOT_FOUND if it was not delivered.
  absl::StatusOr<v1::MembershipChange> Epoch(int32_t epoch) {
    absl::MutexLock lock(&mu_);
    auto it = changes_.find(epoch);
    if (it == changes_.end()) {
      return absl::NotFoundError(absl::StrCat("membership epoch ", epoch, " was not delivered"));
    }
    return it->second;
  }

  // Waits for a change newer than `epoch`; DEADLINE_EXCEEDED after `timeout`, ABORTED if
  // `abort` is set meanwhile.
  absl::StatusOr<v1::MembershipChange> WaitForEpochAbove(int32_t epoch, absl::Duration timeout,
                                                         const std::atomic<bool>* abort) {
    const absl::Time deadline = Clock::Real().Now() + timeout;
    absl::MutexLock lock(&mu_);
    waiting_above_ = epoch;
    // In slices, to see the abort flag (which has no notification of its own).
    while (!delivered_.AwaitWithTimeout(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return Arrived(); },
        absl::Milliseconds(100))) {
      if (abort != nullptr && abort->load()) return absl::AbortedError("the attempt was aborted");
      if (Clock::Real().Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no membership change after epoch ", epoch,
                                                        " came within ",
                                                        absl::FormatDuration(timeout)));
      }
    }
    return changes_.rbegin()->second;
  }

 private:
  bool Arrived() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !changes_.empty() && changes_.rbegin()->first > waiting_above_;
  }

  absl::Mutex mu_;
  // Wakes WaitForEpochAbove, whose slices (the abort flag's polls) are timed on the
  // monotonic clock (common/monotonic_wait.h).
  MonotonicWaker delivered_;
  int32_t waiting_above_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int32_t, v1::MembershipChange> changes_ ABSL_GUARDED_BY(mu_);  // by epoch
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_
