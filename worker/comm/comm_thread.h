#ifndef SHARDWISE_WORKER_COMM_COMM_THREAD_H_
#define SHARDWISE_WORKER_COMM_COMM_THREAD_H_

// The communication thread: runs a rank's collectives one at a time, in the order they
// were enqueued, while the training thread computes. FSDP's prefetched all-gather of the
// next unit then overlaps the current unit's compute, and a unit's reduce-scatter
// overlaps the backward of the units before it (on GPUs this is a stream's job).
// Every rank enqueues the same collectives in the same order, so FIFO execution keeps
// the ranks' collectives paired whatever the timing.
//
// A task may come in two parts (EnqueueInTwoParts): on a device with streams, the first
// enqueues the collective and returns a fence after it, and whoever waits for the task
// can go on as soon as that fence exists, ordering its own stream after it. The second
// part is a poll for the collective's completion (and its watchdog), which the thread
// runs between later tasks and while it has nothing else to do: later collectives are
// enqueued without waiting for earlier ones to complete. That is how the training thread
// follows the all-gathers without waiting for them on the host.
//
// Threads that share a LaunchOrder (launch_order.h) launch their tasks' first parts in
// the order the tasks were enqueued across all of them, not only within each: what NCCL
// needs of a rank's several communicators.
//
// Thread-safety: Enqueue, the Handle's waits and Drain may be called from any thread.
// With a LaunchOrder, the order of Enqueue calls across the threads sharing it is the
// launch order: one thread (the training thread) enqueues, or the callers agree on theirs.

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/monotonic_wait.h"
#include "worker/comm/launch_order.h"
#include "worker/compute/device.h"

namespace shardwise {

class CommThread {
 public:
  using Fence = std::shared_ptr<Device::Fence>;

  class Handle {
   public:
    Handle() = default;
    // Blocks until the task ran (both parts); its status.
    absl::Status Wait() const;
    // Blocks until the task's first part ran: the fence it returned (null: nothing to wait
    // for on the device), or its error. A task in one part: until it ran, with a null
    // fence.
    absl::StatusOr<Fence> WaitStarted() const;
    bool valid() const { return state_ != nullptr; }

   private:
    friend class CommThread;
    struct State {
      void Start(Fence started_fence) ABSL_LOCKS_EXCLUDED(mu);
      void Finish(absl::Status final_status) ABSL_LOCKS_EXCLUDED(mu);

      absl::Mutex mu;
      bool started ABSL_GUARDED_BY(mu) = false;  // the first part succeeded
      Fence fence ABSL_GUARDED_BY(mu);
      bool done ABSL_GUARDED_BY(mu) = false;
      absl::Status status ABSL_GUARDED_BY(mu);
    };
    std::shared_ptr<State> state_;
  };

  // `on_start` runs first on the new thread (e.g. to name its timeline lane); started
  // tasks' completion is polled after every start and every `poll_interval` while
  // nothing else is queued. Nothing but the end of a step waits for a completion, so
  // the interval trades a little of that wait for fewer queries (a GPU's host is
  // usually ahead, with something in flight). `launch_order` (not owned; may be null)
  // must outlive the thread.
  explicit CommThread(std::function<void()> on_start = {}, LaunchOrder* launch_order = nullptr,
                      absl::Duration poll_interval = absl::Microseconds(100));
  // Cancels the queued tasks at once (their handles answer CANCELLED), lets the running
  // task finish and every started one complete (its device work may still use the
  // caller's buffers), and joins. A model is destroyed with tasks queued only after an error,
  // when running more collectives against failed peers would only wait for timeouts.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  Handle Enqueue(std::function<absl::Status()> task);
  // Whether a started task's work, before the fence its first part returned, has
  // completed (true), not yet (false), or failed.
  using CompletionPoll = std::function<absl::StatusOr<bool>(const Fence&)>;
  // `start` enqueues device work and returns a fence after it; unless it failed,
  // `completed` is then polled until it answers true or an error, which the handle's
  // Wait() and Drain() report.
  Handle EnqueueInTwoParts(std::function<absl::StatusOr<Fence>()> start, CompletionPoll completed);

  // Waits until every task enqueued so far has run; the first error of a task since the
  // last Drain, else OK.
  absl::Status Drain();

 private:
  struct Task {
    std::function<absl::StatusOr<Fence>()> start;
    CompletionPoll completed;  // empty: done once started
    Handle handle;
    Fence fence;                      // what `start` returned
    LaunchOrder::Ticket ticket = -1;  // with a LaunchOrder
  };
  void Loop();
  // The next queued task, once there is one (waiting at most a poll interval while
  // `polling`); none when there is nothing to run or the thread stops.
  std::optional<Task> Next(bool polling);
  // Runs `task`'s first part (on its turn) and publishes it; a task left to complete goes
  // to `started`.
  void Start(Task task, std::deque<Task>& started);
  absl::StatusOr<Fence> StartOnTurn(Task& task);
  // Polls the oldest started task once; reports it when it is done.
  void PollOldest(std::deque<Task>& started);
  void Report(Task& task, const absl::Status& status);
  void CancelQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  // Wakes the thread from its poll interval's wait, which is timed on the monotonic clock
  // (common/monotonic_wait.h): a wall clock stepped back would stall the polls.
  MonotonicWaker queue_changed_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  int64_t enqueued_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  LaunchOrder* const launch_order_;
  const absl::Duration poll_interval_;
  std::thread thread_;  // last: starts after the rest is ready
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_COMM_THREAD_H_
