#ifndef SHARDWISE_WORKER_COMM_COMM_THREAD_H_
#define SHARDWISE_WORKER_COMM_COMM_THREAD_H_

// The communication thread: runs a rank's collectives one at a time, in the order they
// were enqueued, while the training thread computes. FSDP's prefetched all-gather of the
// next unit then overlaps the current unit's compute, and a unit's reduce-scatter
// overlaps the backward of the units before it (on GPUs this is a stream's job).
// Every rank enqueues the same collectives in the same order, so FIFO execution keeps
// the ranks' collectives paired whatever the timing.
//
// Thread-safety: Enqueue, Handle::Wait and Drain may be called from any thread.

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace shardwise {

class CommThread {
 public:
  class Handle {
   public:
    Handle() = default;
    // Blocks until the task ran; its status.
    absl::Status Wait() const;
    bool valid() const { return state_ != nullptr; }

   private:
    friend class CommThread;
    struct State {
      absl::Mutex mu;
      bool done ABSL_GUARDED_BY(mu) = false;
      absl::Status status ABSL_GUARDED_BY(mu);
    };
    std::shared_ptr<State> state_;
  };

  // `on_start` runs first on the new thread (e.g. to name its timeline lane).
  explicit CommThread(std::function<void()> on_start = {});
  // Lets the running task finish, cancels the queued ones (their handles answer
  // CANCELLED), and joins. A model is destroyed with tasks queued only after an error,
  // when running more collectives against failed peers would only wait for timeouts.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  Handle Enqueue(std::function<absl::Status()> task);

  // Waits until every task enqueued so far has run; the first error of a task since the
  // last Drain, else OK.
  absl::Status Drain();

 private:
  struct Task {
    std::function<absl::Status()> run;
    Handle handle;
  };
  void Loop();

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the rest is ready
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_COMM_THREAD_H_
