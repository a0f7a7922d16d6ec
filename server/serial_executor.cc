#include "server/serial_executor.h"

#include <utility>

namespace shardwise {

SerialExecutor::SerialExecutor() : thread_([this] { Run(); }) {}

SerialExecutor::~SerialExecutor() {
  Shutdown();
  if (thread_.joinable()) thread_.join();
}

void SerialExecutor::Post(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
}

void SerialExecutor::Shutdown() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

size_t SerialExecutor::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void SerialExecutor::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !tasks_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (tasks_.empty()) return;  // stopping, and everything posted has run
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace shardwise
