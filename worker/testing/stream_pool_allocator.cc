#include "worker/testing/stream_pool_allocator.h"

#include <cstdlib>
#include <cstring>

namespace shardwise::testing {

StreamPoolAllocator::~StreamPoolAllocator() {
  absl::MutexLock lock(&mu_);
  for (auto& [ptr, owner] : blocks_) std::free(ptr);
}

void* StreamPoolAllocator::TakeCached(EmulatedStream* stream, size_t bytes) {
  auto it = cache_.find({stream, bytes});
  if (it == cache_.end()) return nullptr;
  void* ptr = it->second;
  cache_.erase(it);
  stats_.cached_bytes -= static_cast<int64_t>(bytes);
  return ptr;
}

void* StreamPoolAllocator::Allocate(size_t bytes, MemoryCategory category) {
  if (bytes == 0) bytes = 1;
  const size_t rounded = DeviceBlockBytes(bytes);
  EmulatedStream* const stream = stream_of_caller_();
  {
    absl::MutexLock lock(&mu_);
    if (void* reused = TakeCached(stream, rounded); reused != nullptr) {
      stats_.AddLive(category, static_cast<int64_t>(bytes));
      Poison(stream, reused, rounded);
      return reused;
    }
  }
  void* fresh = std::aligned_alloc(64, rounded);
  if (fresh == nullptr) throw AllocationFailure(bytes, category, "emulated GPU");
  std::memset(fresh, kPoison, rounded);  // nobody else can see it yet
  absl::MutexLock lock(&mu_);
  blocks_[fresh] = stream;
  stats_.AddReserved(static_cast<int64_t>(rounded));
  stats_.AddLive(category, static_cast<int64_t>(bytes));
  return fresh;
}

// The new life of a block starts where its stream stands: at once if the stream has run
// everything (nothing of the old life can be pending there), else as the stream's next
// task, after the old life's work on it.
void StreamPoolAllocator::Poison(EmulatedStream* stream, void* block, size_t bytes) {
  if (stream->Idle()) {
    std::memset(block, kPoison, bytes);
  } else {
    stream->Enqueue([block, bytes] { std::memset(block, kPoison, bytes); });
  }
}

void StreamPoolAllocator::Free(void* ptr, size_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  if (bytes == 0) bytes = 1;
  absl::MutexLock lock(&mu_);
  EmulatedStream* const owner = blocks_.at(ptr);
  stats_.AddLive(category, -static_cast<int64_t>(bytes));
  const size_t rounded = DeviceBlockBytes(bytes);
  stats_.cached_bytes += static_cast<int64_t>(rounded);
  cache_.emplace(std::make_pair(owner, rounded), ptr);
}

void StreamPoolAllocator::ZeroFill(void* ptr, size_t bytes) {
  stream_of_caller_()->Enqueue([ptr, bytes] { std::memset(ptr, 0, bytes); });
}

MemoryStats StreamPoolAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void StreamPoolAllocator::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  stats_.ResetPeaks();
}

}  // namespace shardwise::testing
