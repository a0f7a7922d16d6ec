#ifndef SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_
#define SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_

// A fault-tolerant attempt's membership changes (MembershipChange), delivered from the
// session thread while the rank trains; the newest epoch is kept. A rank whose collective
// failed waits here for the change that says who trains on (worker/train/trainer.cc,
// Recover).
//
// Thread-safety: Deliver from the session thread, WaitForEpochAbove from the training
// thread.

#include <atomic>
#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class MembershipMailbox {
 public:
  // Keeps `change` if its epoch is the newest.
  void Deliver(const v1::MembershipChange& change) {
    absl::MutexLock lock(&mu_);
    if (latest_.has_value() && latest_->epoch() >= change.epoch()) return;
    latest_ = change;
  }

  // Waits for a change newer than `epoch`; DEADLINE_EXCEEDED after `timeout`, ABORTED if
  // `abort` is set meanwhile.
  absl::StatusOr<v1::MembershipChange> WaitForEpochAbove(int32_t epoch, absl::Duration timeout,
                                                         const std::atomic<bool>* abort) {
    const absl::Time deadline = absl::Now() + timeout;
    absl::MutexLock lock(&mu_);
    waiting_above_ = epoch;
    // In slices, to see the abort flag (which has no notification of its own).
    while (!mu_.AwaitWithTimeout(absl::Condition(this, &MembershipMailbox::Arrived),
                                 absl::Milliseconds(100))) {
      if (abort != nullptr && abort->load()) return absl::AbortedError("the attempt was aborted");
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat("no membership change after epoch ", epoch,
                                                        " came within ",
                                                        absl::FormatDuration(timeout)));
      }
    }
    return *latest_;
  }

 private:
  bool Arrived() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return latest_.has_value() && latest_->epoch() > waiting_above_;
  }

  absl::Mutex mu_;
  int32_t waiting_above_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<v1::MembershipChange> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MAILBOX_H_
