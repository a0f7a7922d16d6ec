#ifndef SHARDWISE_SERVER_SILENT_SESSIONS_H_
#define SHARDWISE_SERVER_SILENT_SESSIONS_H_

// Worker sessions that have not said hello yet. A session is watched (heartbeats, unread
// messages) only once its hello has opened it, so a stream that never says hello would
// hold its call, and the memory behind it, for as long as its connection lives: those
// still silent `timeout` after they started are ended, DEADLINE_EXCEEDED.
//
// The decisions read the injected clock; the coordinator's periodic work calls
// EndOverdue.
//
// Thread-safety: every method may be called from any thread.

#include <cstddef>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace shardwise {

// A session that can be ended for having said nothing.
class AwaitingHello {
 public:
  virtual ~AwaitingHello() = default;
  // Ends the session, saying it waited `waited` for a hello, unless its hello has
  // arrived or it has ended; returns whether it ended it.
  virtual bool EndIfSilent(absl::Duration waited) = 0;
};

class SilentSessions {
 public:
  explicit SilentSessions(absl::Duration timeout, const Clock* clock = &Clock::Real())
      : timeout_(timeout), clock_(*clock) {}

  // Starts the wait for `session`'s hello, now.
  void Add(std::weak_ptr<AwaitingHello> session);
  // Ends the sessions whose wait has run past the timeout and that are still silent,
  // and forgets every session whose wait has run out; returns how many it ended.
  int EndOverdue();
  // Sessions whose wait has not run out (some of which have said hello since).
  size_t waiting() const;

  absl::Duration timeout() const { return timeout_; }

 private:
  struct Wait {
    std::weak_ptr<AwaitingHello> session;
    absl::Time since;
  };

  const absl::Duration timeout_;
  const Clock& clock_;
  mutable absl::Mutex mu_;
  std::deque<Wait> waits_ ABSL_GUARDED_BY(mu_);  // in the order they started
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SILENT_SESSIONS_H_
