#ifndef SHARDWISE_SERVER_SERIAL_EXECUTOR_H_
#define SHARDWISE_SERVER_SERIAL_EXECUTOR_H_

// One thread that runs posted tasks one at a time, in the order they were posted. The
// coordinator's gRPC callbacks must never wait on a lock held across a state-file commit
// or on the commit itself, so what a worker's message asks of the JobController (a
// report, a registration, a session opening or closing) is posted here instead, and the
// callback returns at once. Each session has at most one task queued at a time (it reads
// its next message only when its task has run), so the queue is bounded by the number of
// sessions and registrations in flight. Heartbeats, read at once on their session, post
// only through PostOnce: one task per key queued at a time, however fast they come. It
// is a CallPool of one thread and no bound; destroyed, it runs every task already posted,
// then stops the thread.
//
// Thread-safety: Post() may be called from any thread, also from a running task.

#include <cstddef>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/call_pool.h"

namespace shardwise {

class SerialExecutor {
 public:
  SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Queues `task`; after Shutdown() it is dropped (the coordinator is going away).
  void Post(std::function<void()> task);
  // Queues `task` unless a task posted under `key` is queued and has not started: what
  // it would do, that one does.
  void PostOnce(const std::string& key, std::function<void()> task);
  // Runs what is queued and stops accepting tasks.
  void Shutdown();
  size_t queued() const;

 private:
  // Before the pool: destroyed, the pool runs what is queued, PostOnce's tasks among them,
  // which still use these.
  absl::Mutex mu_;
  absl::flat_hash_set<std::string> queued_keys_ ABSL_GUARDED_BY(mu_);
  CallPool pool_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_SERIAL_EXECUTOR_H_
