#ifndef SHARDWISE_WORKER_TRAIN_PLAN_MAILBOX_H_
#define SHARDWISE_WORKER_TRAIN_PLAN_MAILBOX_H_

// A prefetch plan the coordinator re-derived (PlanUpdate), delivered while the attempt
// trains and held until every rank has it: the trainer counts the ranks that hold a newer
// plan in each step's loss all-reduce and adopts it after the first step at which all do.
//
// Thread-safety: Deliver from the session thread, NewerThan from the training thread.

#include <cstdint>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "proto/job.pb.h"

namespace shardwise {

class PlanMailbox {
 public:
  // Keeps the plan of the highest version delivered.
  void Deliver(const v1::PrefetchPlan& plan) {
    absl::MutexLock lock(&mu_);
    if (!plan_.has_value() || plan.version() > plan_->version()) plan_ = plan;
  }

  // The delivered plan, if its version is above `version`.
  std::optional<v1::PrefetchPlan> NewerThan(int32_t version) const {
    absl::MutexLock lock(&mu_);
    if (plan_.has_value() && plan_->version() > version) return plan_;
    return std::nullopt;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<v1::PrefetchPlan> plan_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_PLAN_MAILBOX_H_
