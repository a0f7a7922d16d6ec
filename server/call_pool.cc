#include "server/call_pool.h"

#include <utility>

namespace shardwise {

CallPool::CallPool(int threads, size_t max_queued) : max_queued_(max_queued) {
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

CallPool::~CallPool() {
  Stop();
  for (std::thread& thread : threads_) thread.join();
}

void CallPool::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

size_t CallPool::queued() const {
  absl::MutexLock lock(&mu_);
  return calls_.size();
}

bool CallPool::TryPost(std::function<void()> call) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || calls_.size() >= max_queued_) return false;
  calls_.push_back(std::move(call));
  return true;
}

void CallPool::Run() {
  while (true) {
    std::function<void()> call;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !calls_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (calls_.empty()) return;  // stopping, and everything queued has run
      call = std::move(calls_.front());
      calls_.pop_front();
    }
    call();
  }
}

}  // namespace shardwise
