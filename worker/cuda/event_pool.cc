#include "worker/cuda/event_pool.h"

#include <utility>

namespace shardwise::cuda {

EventPool::EventPool(bool timing) : shared_(std::make_shared<Shared>(timing)) {}

absl::StatusOr<std::shared_ptr<Event>> EventPool::Acquire() {
  Event event;
  {
    absl::MutexLock lock(&shared_->mu);
    if (!shared_->free.empty()) {
      event = std::move(shared_->free.back());
      shared_->free.pop_back();
    }
  }
  if (event.get() == nullptr) {
    absl::StatusOr<Event> created = Event::Create(shared_->timing);
    if (!created.ok()) return created.status();
    event = std::move(*created);
    absl::MutexLock lock(&shared_->mu);
    ++shared_->created;
  }
  // Back to the free list when the last holder drops it (the list kept alive until then).
  return std::shared_ptr<Event>(new Event(std::move(event)), [shared = shared_](Event* lent) {
    {
      absl::MutexLock lock(&shared->mu);
      shared->free.push_back(std::move(*lent));
    }
    delete lent;
  });
}

size_t EventPool::created() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->created;
}

}  // namespace shardwise::cuda
