#include "server/serial_executor.h"

#include <limits>
#include <utility>

namespace shardwise {

SerialExecutor::SerialExecutor()
    : pool_(/*threads=*/1, /*max_queued=*/std::numeric_limits<size_t>::max()) {}

void SerialExecutor::Post(std::function<void()> task) { pool_.TryPost(std::move(task)); }

void SerialExecutor::PostOnce(const std::string& key, std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    if (!queued_keys_.insert(key).second) return;
  }
  const bool posted = pool_.TryPost([this, key, task = std::move(task)] {
    {
      absl::MutexLock lock(&mu_);
      queued_keys_.erase(key);  // a heartbeat from here on asks again
    }
    task();
  });
  if (!posted) {
    absl::MutexLock lock(&mu_);
    queued_keys_.erase(key);
  }
}

void SerialExecutor::Shutdown() { pool_.Stop(); }

size_t SerialExecutor::queued() const { return pool_.queued(); }

}  // namespace shardwise
