#include "worker/train/hook_schedule.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace shardwise {

void HookSchedule::AddCommitted(int64_t step, const v1::CommHook& hook) {
  absl::MutexLock lock(&mu_);
  committed_[step] = hook;
}

bool HookSchedule::Propose(int32_t version, int64_t step, const v1::CommHook& hook) {
  absl::MutexLock lock(&mu_);
  if (started_step_ >= step) return false;
  pending_ = Proposal{version, step, hook};
  return true;
}

void HookSchedule::Decide(int32_t version, bool commit) {
  absl::MutexLock lock(&mu_);
  if (!pending_.has_value() || pending_->version != version) return;
  if (commit) committed_[pending_->step] = pending_->hook;
  pending_.reset();
  decided_.NotifyAll();
}

absl::StatusOr<std::optional<v1::CommHook>> HookSchedule::HookForStep(
    int64_t step, const std::atomic<bool>* abort) {
  absl::MutexLock lock(&mu_);
  started_step_ = step;
  // Held here until the proposal for this step is decided; the abort flag is polled, as
  // nothing signals the mutex when it is set.
  while (pending_.has_value() && pending_->step <= step) {
    holding_ = true;
    if (abort != nullptr && abort->load()) {
      holding_ = false;
      return absl::AbortedError(
          absl::StrCat("aborted while waiting for the coordinator's decision on the comm "
                       "hook switch at step ",
                       pending_->step));
    }
    decided_.AwaitWithTimeout(
        mu_, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !pending_.has_value(); },
        absl::Milliseconds(100));
  }
  holding_ = false;
  auto after = committed_.upper_bound(step);
  if (after == committed_.begin()) return std::nullopt;
  return std::prev(after)->second;
}

int64_t HookSchedule::started_step() const {
  absl::MutexLock lock(&mu_);
  return started_step_;
}

bool HookSchedule::holding() const {
  absl::MutexLock lock(&mu_);
  return holding_;
}

}  // namespace shardwise
