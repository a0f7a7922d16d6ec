#ifndef SHARDWISE_SERVER_CALL_POOL_H_
#define SHARDWISE_SERVER_CALL_POOL_H_

// Threads that run queued calls in the order queued. The JobService's calls are answered
// on a few of them, off gRPC's callback threads: a call
// may wait on a state-file commit (a submission, a cancel) or read the state file (an
// ended job), and gRPC's threads also carry every worker's heartbeats, which must not
// queue behind a flood of clients. The queue is bounded: beyond `max_queued` calls
// waiting, TryPost refuses and the caller answers RESOURCE_EXHAUSTED, which clients retry
// with backoff (docs/operations.md), so a flood costs the coordinator bounded memory.
// With one thread and no bound it is the coordinator's SerialExecutor.
//
// Thread-safety: TryPost() may be called from any thread.

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardwise {

class CallPool {
 public:
  CallPool(int threads, size_t max_queued);
  // Runs every call already queued, then stops the threads.
  ~CallPool();
  CallPool(const CallPool&) = delete;
  CallPool& operator=(const CallPool&) = delete;

  // Queues `call` for a pool thread; false, and `call` dropped, when `max_queued` calls
  // already wait or after Stop().
  bool TryPost(std::function<void()> call);
  // Takes no more calls; the threads run what is queued, then end.
  void Stop();
  size_t queued() const;
  size_t max_queued() const { return max_queued_; }

 private:
  void Run();

  const size_t max_queued_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> calls_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // last: started once the rest exists
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_CALL_POOL_H_
