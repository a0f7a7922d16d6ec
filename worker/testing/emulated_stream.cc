#include "worker/testing/emulated_stream.h"

#include <utility>

namespace shardwise::testing {

EmulatedStream::EmulatedStream(std::string name, const StreamTiming& timing)
    : name_(std::move(name)), timing_(timing), random_(timing.seed), thread_([this] { Run(); }) {}

EmulatedStream::~EmulatedStream() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    work_.Signal();
  }
  thread_.join();
}

void EmulatedStream::Enqueue(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(task));
  ++enqueued_;
  work_.Signal();
}

void EmulatedStream::Drain() {
  absl::MutexLock lock(&mu_);
  const int64_t target = enqueued_;
  while (finished_ < target) progress_.Wait(&mu_);
}

bool EmulatedStream::Idle() {
  absl::MutexLock lock(&mu_);
  return finished_ == enqueued_;
}

absl::Duration EmulatedStream::NextPause() {
  if (timing_.max_pause <= absl::ZeroDuration()) return timing_.min_pause;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  if (unit(random_) >= timing_.pause_probability) return timing_.min_pause;
  return timing_.min_pause + unit(random_) * timing_.max_pause;
}

void EmulatedStream::Run() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) work_.Wait(&mu_);
      if (queue_.empty()) return;  // stopping, and everything ran
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    const absl::Duration pause = NextPause();
    if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
    task();
    absl::MutexLock lock(&mu_);
    ++finished_;
    progress_.SignalAll();
  }
}

}  // namespace shardwise::testing
