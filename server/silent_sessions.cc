#include "server/silent_sessions.h"

#include <utility>
#include <vector>

namespace shardwise {

void SilentSessions::Add(std::weak_ptr<AwaitingHello> session) {
  const absl::Time now = clock_.Now();
  absl::MutexLock lock(&mu_);
  waits_.push_back({std::move(session), now});
}

int SilentSessions::EndOverdue() {
  std::vector<std::shared_ptr<AwaitingHello>> overdue;
  {
    const absl::Time due = clock_.Now() - timeout_;
    absl::MutexLock lock(&mu_);
    while (!waits_.empty() && waits_.front().since <= due) {
      if (auto session = waits_.front().session.lock()) overdue.push_back(std::move(session));
      waits_.pop_front();
    }
  }
  // Outside the lock: ending a session finishes its call, which may run gRPC's reactions
  // inline.
  int ended = 0;
  for (const auto& session : overdue) ended += session->EndIfSilent(timeout_) ? 1 : 0;
  return ended;
}

size_t SilentSessions::waiting() const {
  absl::MutexLock lock(&mu_);
  return waits_.size();
}

}  // namespace shardwise
