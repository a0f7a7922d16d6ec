#include "worker/comm/launch_order.h"

namespace shardwise {

LaunchOrder::Ticket LaunchOrder::Take() {
  absl::MutexLock lock(&mu_);
  return next_++;
}

bool LaunchOrder::IsTurnLocked(Ticket ticket) const { return turn_ >= ticket; }

bool LaunchOrder::IsTurn(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  return IsTurnLocked(ticket);
}

void LaunchOrder::AwaitTurn(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  ++waiting_;
  auto turn = [this, ticket]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return IsTurnLocked(ticket); };
  mu_.Await(absl::Condition(&turn));
  --waiting_;
}

void LaunchOrder::Release(Ticket ticket) {
  absl::MutexLock lock(&mu_);
  if (ticket < turn_) return;  // released already
  if (ticket != turn_) {
    // A cancelled task's ticket, released before its turn.
    released_early_.insert(ticket);
    return;
  }
  ++turn_;
  while (!released_early_.empty() && *released_early_.begin() == turn_) {
    released_early_.erase(released_early_.begin());
    ++turn_;
  }
}

bool LaunchOrder::AwaitWaiters(int threads, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [this, threads]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiting_ >= threads; };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace shardwise
