#ifndef SHARDWISE_SERVER_SESSION_OUTBOX_H_
#define SHARDWISE_SERVER_SESSION_OUTBOX_H_

// The downward half of one worker session: where the controller queues messages for a
// worker without waiting on the network. The coordinator's is the session stream itself
// (server/session_stream.h, gRPC's callback API); QueuedOutbox keeps them for a test or a
// fuzzer to read.
//
// Thread-safety: implementations are safe for any number of producers.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class SessionOutbox {
 public:
  // The most messages a session holds for its worker at once, the one being written
  // included: a worker gets a few per attempt (its assignment, plan and hook changes, an
  // abort), so one that leaves this many unread reads nothing (or claims reads it never
  // made, keeping the unread check quiet), and its session is ended rather than let grow.
  static constexpr size_t kMaxQueuedMessages = 4096;

  virtual ~SessionOutbox() = default;
  // Queues `message`; false if the session has closed (the message is dropped), or
  // has just been closed for holding kMaxQueuedMessages (overflowed()).
  virtual bool Push(v1::CoordinatorMessage message) = 0;
  // Whether the session was ended for holding kMaxQueuedMessages unread.
  virtual bool overflowed() const { return false; }
  // Ends the session: nothing more is sent, and the worker sees its stream close.
  virtual void Close() = 0;
  // Queues `last` and ends the session once it and everything queued before it are
  // sent.
  virtual void CloseAfter(v1::CoordinatorMessage last) {
    Push(std::move(last));
    Close();
  }
  virtual bool closed() const = 0;

  // How far the worker has read: the messages it has taken so far, and whether one is
  // waiting for it to take. A count that stays put while a message waits means the
  // worker reads nothing (WorkerRegistry::Unread).
  struct Delivery {
    uint64_t taken = 0;
    bool waiting = false;
  };
  virtual Delivery delivery() const = 0;
};

// Keeps what is pushed for the reader's Pop(). As a stream's transport buffers a window
// of messages before a write waits on its reader, `buffered` messages may wait unread
// before delivery() says one waits (by default any number: a test that never reads is
// not a stuck worker unless it asks to be).
class QueuedOutbox final : public SessionOutbox {
 public:
  explicit QueuedOutbox(size_t buffered = std::numeric_limits<size_t>::max())
      : buffered_(buffered) {}

  bool Push(v1::CoordinatorMessage message) override {
    absl::MutexLock lock(&mu_);
    if (closed_) return false;
    queue_.push_back(std::move(message));
    return true;
  }

  // The next message, or nullopt after `timeout` or once closed.
  std::optional<v1::CoordinatorMessage> Pop(absl::Duration timeout = absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (queue_.empty()) return std::nullopt;
    v1::CoordinatorMessage message = std::move(queue_.front());
    queue_.pop_front();
    ++taken_;
    return message;
  }

  void Close() override {
    absl::MutexLock lock(&mu_);
    closed_ = true;
  }

  bool closed() const override {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

  // The reader's Pop()s are the worker's reads.
  Delivery delivery() const override {
    absl::MutexLock lock(&mu_);
    return {taken_, queue_.size() > buffered_};
  }

 private:
  const size_t buffered_;
  mutable absl::Mutex mu_;
  std::deque<v1::CoordinatorMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t taken_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SESSION_OUTBOX_H_
