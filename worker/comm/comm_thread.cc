#include "worker/comm/comm_thread.h"

#include "worker/runtime/memory.h"

namespace shardwise {

namespace {

// A task's part, with an allocation failure turned into its status: the task fails, the
// thread (and worker) live on.
template <typename Part>
auto RunPart(Part& part) -> decltype(part()) {
  try {
    return part();
  } catch (const std::bad_alloc& failure) {
    return AllocationFailureStatus(failure);
  }
}

}  // namespace

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

CommThread::CommThread(std::function<void()> on_start)
    : thread_([this, on_start = std::move(on_start)] {
        if (on_start) on_start();
        Loop();
      }) {}

CommThread::~CommThread() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
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
                                                 std::function<absl::Status()> finish) {
  Handle handle;
  handle.state_ = std::make_shared<Handle::State>();
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(start), std::move(finish), handle});
  ++enqueued_;
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
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) {
        for (Task& cancelled : queue_) {
          absl::MutexLock done(&cancelled.handle.state_->mu);
          cancelled.handle.state_->done = true;
          cancelled.handle.state_->status =
              absl::CancelledError("the communication thread stopped before this collective");
        }
        finished_ += static_cast<int64_t>(queue_.size());
        queue_.clear();
        return;
      }
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    const absl::Status status = Run(task);
    {
      absl::MutexLock lock(&task.handle.state_->mu);
      task.handle.state_->done = true;
      task.handle.state_->status = status;
    }
    absl::MutexLock lock(&mu_);
    ++finished_;
    if (!status.ok() && first_error_.ok()) first_error_ = status;
  }
}

absl::Status CommThread::Run(Task& task) {
  absl::StatusOr<Fence> started = RunPart(task.start);
  if (!started.ok()) return started.status();
  {
    absl::MutexLock lock(&task.handle.state_->mu);
    task.handle.state_->started = true;
    task.handle.state_->fence = *std::move(started);
  }
  return task.finish ? RunPart(task.finish) : absl::OkStatus();
}

}  // namespace shardwise
