#include "worker/comm/comm_thread.h"

#include <utility>

#include "worker/runtime/memory.h"

namespace shardwise {

namespace {

// A task's part, with an allocation failure turned into its status: the task fails, the
// thread (and worker) live on.
template <typename Part, typename... Args>
auto RunPart(Part& part, const Args&... args) -> decltype(part(args...)) {
  try {
    return part(args...);
  } catch (const std::bad_alloc& failure) {
    return AllocationFailureStatus(failure);
  }
}

}  // namespace

void CommThread::Handle::State::Start(Fence started_fence) {
  absl::MutexLock lock(&mu);
  started = true;
  fence = std::move(started_fence);
}

void CommThread::Handle::State::Finish(absl::Status final_status) {
  absl::MutexLock lock(&mu);
  done = true;
  status = std::move(final_status);
}

absl::Status CommThread::Handle::Wait() const {
  if (state_ == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(&state_->done));
  return state_->status;
}

absl::StatusOr<CommThread::Fence> CommThread::Handle::WaitStarted() const {
  if (state_ == nullptr) return Fence();
  State& state = *state_;
  absl::MutexLock lock(&state.mu);
  auto started = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
    return state.started || state.done;
  };
  state.mu.Await(absl::Condition(&started));
  if (state.started) return state.fence;
  return state.status;
}

CommThread::CommThread(std::function<void()> on_start, LaunchOrder* launch_order,
                       absl::Duration poll_interval)
    : launch_order_(launch_order),
      poll_interval_(poll_interval),
      thread_([this, on_start = std::move(on_start)] {
        if (on_start) on_start();
        Loop();
      }) {}

CommThread::~CommThread() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    // At once, not after the running task: whoever waits for a queued collective learns
    // now that it will not run, rather than after a collective that may wait out a timeout.
    CancelQueuedLocked();
    queue_changed_.NotifyAll();
  }
  thread_.join();
}

CommThread::Handle CommThread::Enqueue(std::function<absl::Status()> task) {
  return EnqueueInTwoParts(
      [task = std::move(task)]() -> absl::StatusOr<Fence> {
        absl::Status status = task();
        if (!status.ok()) return status;
        return Fence();
      },
      nullptr);
}

CommThread::Handle CommThread::EnqueueInTwoParts(std::function<absl::StatusOr<Fence>()> start,
                                                 CompletionPoll completed) {
  Handle handle;
  handle.state_ = std::make_shared<Handle::State>();
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(start), std::move(completed), handle});
  // Under the lock: this queue's order is its tickets' order.
  if (launch_order_ != nullptr) queue_.back().ticket = launch_order_->Take();
  ++enqueued_;
  queue_changed_.NotifyAll();
  return handle;
}

absl::Status CommThread::Drain() {
  absl::MutexLock lock(&mu_);
  const int64_t target = enqueued_;
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ >= target; };
  mu_.Await(absl::Condition(&done));
  absl::Status error = first_error_;
  first_error_ = absl::OkStatus();
  return error;
}

void CommThread::Loop() {
  std::deque<Task> started;  // first part run, completion not yet seen; oldest first
  for (;;) {
    std::optional<Task> next = Next(/*polling=*/!started.empty());
    if (next.has_value()) {
      Start(*std::move(next), started);
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stop_) break;
    }
    PollOldest(started);
  }
  // Stopping: what was started is seen through, as its device work may still use the
  // buffers of whoever queued it (its poll's watchdog bounds the wait).
  while (!started.empty()) {
    PollOldest(started);
    if (!started.empty()) absl::SleepFor(poll_interval_);
  }
}

std::optional<CommThread::Task> CommThread::Next(bool polling) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
  if (polling) {
    queue_changed_.AwaitWithTimeout(mu_, ready, poll_interval_);
  } else {
    mu_.Await(absl::Condition(&ready));
  }
  if (stop_) {
    CancelQueuedLocked();
    return std::nullopt;
  }
  if (queue_.empty()) return std::nullopt;
  Task task = std::move(queue_.front());
  queue_.pop_front();
  return task;
}

absl::StatusOr<CommThread::Fence> CommThread::StartOnTurn(Task& task) {
  if (launch_order_ == nullptr) return RunPart(task.start);
  launch_order_->AwaitTurn(task.ticket);
  absl::StatusOr<Fence> fence = RunPart(task.start);
  launch_order_->Release(task.ticket);
  return fence;
}

void CommThread::Start(Task task, std::deque<Task>& started) {
  absl::StatusOr<Fence> fence = StartOnTurn(task);
  if (!fence.ok()) {
    Report(task, fence.status());
    return;
  }
  task.fence = *std::move(fence);
  task.handle.state_->Start(task.fence);
  if (!task.completed) {
    Report(task, absl::OkStatus());
    return;
  }
  started.push_back(std::move(task));
  // Work that completes as it is called (a CPU's) is reported at once, and a lane kept
  // busy still watches what it started.
  PollOldest(started);
}

void CommThread::PollOldest(std::deque<Task>& started) {
  if (started.empty()) return;
  Task& oldest = started.front();
  const absl::StatusOr<bool> completed = RunPart(oldest.completed, oldest.fence);
  if (completed.ok() && !*completed) return;
  Report(oldest, completed.status());
  started.pop_front();
}

void CommThread::Report(Task& task, const absl::Status& status) {
  task.handle.state_->Finish(status);
  absl::MutexLock lock(&mu_);
  ++finished_;
  if (!status.ok() && first_error_.ok()) first_error_ = status;
}

void CommThread::CancelQueuedLocked() {
  for (Task& cancelled : queue_) {
    cancelled.handle.state_->Finish(
        absl::CancelledError("the communication thread stopped before this collective"));
    // Another thread's later tasks must not wait for this one's turn.
    if (launch_order_ != nullptr) launch_order_->Release(cancelled.ticket);
  }
  finished_ += static_cast<int64_t>(queue_.size());
  queue_.clear();
}

}  // namespace shardwise
