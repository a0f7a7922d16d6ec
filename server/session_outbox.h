#ifndef SHARDWISE_SERVER_SESSION_OUTBOX_H_
#define SHARDWISE_SERVER_SESSION_OUTBOX_H_

// The downward half of one worker session: the controller queues messages without
// blocking on the network, and the session's gRPC handler thread sends them.
//
// Thread-safety: safe for any number of producers and one consumer.

#include <deque>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class SessionOutbox {
 public:
  // False if the session has closed (the message is dropped).
  bool Push(v1::CoordinatorMessage message) {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    queue_.push_back(std::move(message));
    return true;
  }

  // The next message, or nullopt after `timeout` or once closed.
  std::optional<v1::CoordinatorMessage> Pop(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (closed_ || queue_.empty()) return std::nullopt;
    v1::CoordinatorMessage message = std::move(queue_.front());
    queue_.pop_front();
    return message;
  }

  void Close() {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  bool closed() const {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SESSION_OUTBOX_H_
