#ifndef SHARDWISE_SERVER_UNREAD_MESSAGES_H_
#define SHARDWISE_SERVER_UNREAD_MESSAGES_H_

// The messages a worker's session has written to its connection that the worker's
// heartbeats do not yet say it read (v1::Heartbeat.messages_read), each with when it was
// first seen written. A daemon whose session reader is stuck while its heartbeats go on
// leaves them unread however little it is sent: the registry loses it once the oldest
// has waited past --unread_timeout_ms, where a write stalled on a full connection window
// (SessionOutbox::Delivery) would need 64 KiB or more of messages first. Pure: the
// registry locks it and gives it the time.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>

#include "absl/time/time.h"

namespace shardwise {

class UnreadMessages {
 public:
  // The entries kept; past them, the newest entry takes the newer count and time, so that
  // the messages between are dated later than they were written (never lost sooner).
  static constexpr size_t kMaxEntries = 1024;

  // The session had written `written` messages by `now` (a count that only grows).
  void Written(uint64_t written, absl::Time now);
  // The worker says it read `read` messages of this session.
  void Read(uint64_t read);
  // When the oldest message the worker has not said it read was seen written; nullopt
  // when it read them all.
  std::optional<absl::Time> OldestUnreadSince() const;

 private:
  uint64_t written_ = 0;
  uint64_t read_ = 0;
  std::deque<std::pair<uint64_t, absl::Time>> unread_;  // (written count, seen), ascending
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_UNREAD_MESSAGES_H_
