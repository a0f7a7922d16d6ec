#include "worker/runtime/memory.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "parameters";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizerState: return "optimizer_state";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kCommunication: return "communication";
  }
  return "unknown";
}

AllocationFailure::AllocationFailure(size_t bytes, MemoryCategory category, const char* device)
    : message_(absl::StrFormat("could not allocate %.1f MiB of %s on the %s",
                               static_cast<double>(bytes) / (1 << 20),
                               MemoryCategoryName(category), device)) {}

absl::Status AllocationFailureStatus(const std::bad_alloc& failure, const std::string& activity) {
  const bool ours = dynamic_cast<const AllocationFailure*>(&failure) != nullptr;
  return absl::ResourceExhaustedError(absl::StrCat(
      "out of memory", activity.empty() ? "" : " while ", activity, ": ",
      ours ? failure.what() : "the host could not allocate"));
}

CpuCachingAllocator::~CpuCachingAllocator() { ReleaseCache(); }

void* CpuCachingAllocator::Allocate(size_t bytes, MemoryCategory category) {
  if (bytes == 0) bytes = 1;
  void* ptr = nullptr;
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(bytes);
    if (it != cache_.end()) {
      ptr = it->second;
      cache_.erase(it);
      stats_.cached_bytes -= static_cast<int64_t>(bytes);
    }
    const int c = static_cast<int>(category);
    stats_.live_bytes[c] += static_cast<int64_t>(bytes);
    if (stats_.live_bytes[c] > stats_.peak_bytes[c]) stats_.peak_bytes[c] = stats_.live_bytes[c];
  }
  if (ptr == nullptr) {
    // 64-byte alignment: whole cache lines, and what vectorised kernels want.
    ptr = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (ptr == nullptr) {
      absl::MutexLock lock(&mu_);
      stats_.live_bytes[static_cast<int>(category)] -= static_cast<int64_t>(bytes);
      throw AllocationFailure(bytes, category, "host");
    }
  }
  return ptr;
}

void CpuCachingAllocator::Free(void* ptr, size_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  if (bytes == 0) bytes = 1;
  absl::MutexLock lock(&mu_);
  stats_.live_bytes[static_cast<int>(category)] -= static_cast<int64_t>(bytes);
  stats_.cached_bytes += static_cast<int64_t>(bytes);
  cache_.emplace(bytes, ptr);
}

MemoryStats CpuCachingAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CpuCachingAllocator::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  stats_.peak_bytes = stats_.live_bytes;
}

void CpuCachingAllocator::ReleaseCache() {
  absl::MutexLock lock(&mu_);
  for (auto& [bytes, ptr] : cache_) std::free(ptr);
  cache_.clear();
  stats_.cached_bytes = 0;
}

Buffer::Buffer(Allocator* allocator, size_t numel, MemoryCategory category, ScalarType type,
               bool zero)
    : allocator_(allocator), numel_(numel), category_(category), type_(type) {
  if (numel == 0) return;  // an empty unit (a root without layers) holds nothing
  data_ = allocator->Allocate(bytes(), category);
  if (zero) allocator->ZeroFill(data_, bytes());
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    allocator_ = other.allocator_;
    data_ = other.data_;
    numel_ = other.numel_;
    category_ = other.category_;
    type_ = other.type_;
    other.data_ = nullptr;
    other.numel_ = 0;
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr) allocator_->Free(data_, bytes(), category_);
  data_ = nullptr;
  numel_ = 0;
}

}  // namespace shardwise
