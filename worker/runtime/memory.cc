#include "worker/runtime/memory.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {
namespace {

// What aligned_alloc is asked for: whole 64-byte lines.
size_t AlignedSize(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

const char* MemoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizerState:
      return "optimizer_state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kCommunication:
      return "communication";
  }
  return "unknown";
}

AllocationFailure::AllocationFailure(size_t bytes, MemoryCategory category, const char* device,
                                     const std::string& fault, const std::string& reason)
    : message_(absl::StrFormat("could not allocate %.1f MiB of %s on the %s%s%s",
                               static_cast<double>(bytes) / (1 << 20), MemoryCategoryName(category),
                               device, fault.empty() ? "" : absl::StrCat(": ", fault),
                               reason.empty() ? "" : absl::StrCat(" (", reason, ")"))),
      out_of_memory_(fault.empty()) {}

absl::Status AllocationFailureStatus(const std::bad_alloc& failure, const std::string& activity) {
  const auto* ours = dynamic_cast<const AllocationFailure*>(&failure);
  const std::string during = activity.empty() ? "" : absl::StrCat(" while ", activity);
  if (ours != nullptr && !ours->out_of_memory()) {
    return absl::InternalError(absl::StrCat("device failure", during, ": ", ours->what()));
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("out of memory", during, ": ",
                   ours != nullptr ? ours->what() : "the host could not allocate"));
}

int64_t MemoryStats::live_total() const {
  int64_t total = 0;
  for (int64_t bytes : live_bytes) total += bytes;
  return total;
}

void MemoryStats::AddLive(MemoryCategory c, int64_t bytes) {
  int64_t& live = live_bytes[static_cast<int>(c)];
  live += bytes;
  peak_bytes[static_cast<int>(c)] = std::max(peak_bytes[static_cast<int>(c)], live);
  peak_live_bytes = std::max(peak_live_bytes, live_total());
}

void MemoryStats::AddReserved(int64_t bytes) {
  reserved_bytes += bytes;
  peak_reserved_bytes = std::max(peak_reserved_bytes, reserved_bytes);
}

void MemoryStats::ResetPeaks() {
  peak_bytes = live_bytes;
  peak_live_bytes = live_total();
  peak_reserved_bytes = reserved_bytes;
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
    if (ptr != nullptr) stats_.AddLive(category, static_cast<int64_t>(bytes));
  }
  if (ptr == nullptr) {
    CheckHeadroom(bytes, category);
    // 64-byte alignment: whole cache lines, and what vectorised kernels want.
    ptr = std::aligned_alloc(64, AlignedSize(bytes));
    if (ptr == nullptr) throw AllocationFailure(bytes, category, "host");
    absl::MutexLock lock(&mu_);
    stats_.AddReserved(static_cast<int64_t>(AlignedSize(bytes)));
    stats_.AddLive(category, static_cast<int64_t>(bytes));
  }
  return ptr;
}

void CpuCachingAllocator::CheckHeadroom(size_t bytes, MemoryCategory category) {
  if (!headroom_ || bytes < kHeadroomCheckedBytes) return;
  const int64_t needed = static_cast<int64_t>(AlignedSize(bytes)) + kHeadroomReserve;
  int64_t left = headroom_();
  if (left < 0 || needed <= left) return;
  // Blocks of other sizes given back to make room, as PyTorch's allocator does, and the
  // heap's free pages with them (ReleaseCache trims it): memory.current counted them.
  ReleaseCache();
  left = headroom_();
  if (left < 0 || needed <= left) return;
  throw AllocationFailure(
      bytes, category, "host", "",
      absl::StrFormat("this worker's memory limit, its cgroup's memory.max, leaves %.1f MiB "
                      "(file cache counted as free), less a reserve of %d MiB; past it the "
                      "kernel's OOM killer would end the worker",
                      static_cast<double>(left) / (1 << 20), kHeadroomReserve >> 20));
}

void CpuCachingAllocator::Free(void* ptr, size_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  if (bytes == 0) bytes = 1;
  absl::MutexLock lock(&mu_);
  stats_.AddLive(category, -static_cast<int64_t>(bytes));
  stats_.cached_bytes += static_cast<int64_t>(bytes);
  cache_.emplace(bytes, ptr);
}

MemoryStats CpuCachingAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CpuCachingAllocator::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  stats_.ResetPeaks();
}

void CpuCachingAllocator::ReleaseCache() {
  {
    absl::MutexLock lock(&mu_);
    for (auto& [bytes, ptr] : cache_) {
      std::free(ptr);
      stats_.AddReserved(-static_cast<int64_t>(AlignedSize(bytes)));
    }
    cache_.clear();
    stats_.cached_bytes = 0;
  }
  // Blocks below glibc's mmap threshold (which rises to 32 MiB once a mapped block is
  // freed) went back to its heap, still resident: returned to the system here, or the
  // host (and a pod's memory.current) would count them as in use.
  malloc_trim(0);
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
