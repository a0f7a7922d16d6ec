#include "worker/cuda/cuda_allocator.h"

#include <algorithm>
#include <cstdio>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {

CudaCachingAllocator::~CudaCachingAllocator() { ReleaseCache(); }

// 512-byte granules, as PyTorch's allocator rounds small blocks: every block starts
// aligned for vector loads, and nearby sizes share cached blocks.
void* CudaCachingAllocator::Allocate(size_t bytes, MemoryCategory category) {
  const size_t rounded = DeviceBlockBytes(bytes);
  const cudaStream_t stream = stream_of_caller_();
  void* ptr = nullptr;
  {
    absl::MutexLock lock(&mu_);
    ptr = TakeCached(stream, rounded);
  }
  if (ptr == nullptr) ptr = AllocateFromDevice(rounded, category);
  absl::MutexLock lock(&mu_);
  owner_[ptr] = stream;
  // Counters count what was asked for, as on the CPU, so both report the same numbers.
  stats_.AddLive(category, static_cast<int64_t>(bytes));
  return ptr;
}

void* CudaCachingAllocator::TakeCached(cudaStream_t stream, size_t rounded) {
  auto it = cache_.find({stream, rounded});
  if (it == cache_.end()) return nullptr;
  void* ptr = it->second;
  cache_.erase(it);
  stats_.cached_bytes -= static_cast<int64_t>(rounded);
  return ptr;
}

cudaError_t CudaCachingAllocator::RetryAfterRelease(void** ptr, size_t rounded) {
  absl::MutexLock releasing(&release_mu_);
  cudaGetLastError();  // clear the sticky-free error before retrying
  cudaError_t error = cudaMalloc(ptr, rounded);
  if (error != cudaErrorMemoryAllocation) return error;
  cudaGetLastError();
  ReleaseCacheWhileReleasing();
  return cudaMalloc(ptr, rounded);
}

void* CudaCachingAllocator::AllocateFromDevice(size_t rounded, MemoryCategory category) {
  void* ptr = nullptr;
  cudaError_t error = cudaMalloc(&ptr, rounded);
  if (error == cudaErrorMemoryAllocation) error = RetryAfterRelease(&ptr, rounded);
  absl::MutexLock lock(&mu_);
  if (error != cudaSuccess) {
    cudaGetLastError();
    // Another error than memory (a device that faulted earlier) is named, not
    // reported as the job being too large.
    const std::string fault = error == cudaErrorMemoryAllocation
                                  ? ""
                                  : std::string(CudaStatus(error, "cudaMalloc").message());
    LogError(
        LogContext(),
        absl::StrCat("CudaCachingAllocator: cudaMalloc(", rounded, " bytes) for ",
                     MemoryCategoryName(category), " failed: ", cudaGetErrorString(error),
                     "; live parameters ", stats_.live(MemoryCategory::kParameters), ", gradients ",
                     stats_.live(MemoryCategory::kGradients), ", optimizer state ",
                     stats_.live(MemoryCategory::kOptimizerState), ", activations ",
                     stats_.live(MemoryCategory::kActivations), ", communication ",
                     stats_.live(MemoryCategory::kCommunication), " bytes"));
    throw AllocationFailure(rounded, category, "GPU", fault);
  }
  ++device_allocations_;
  stats_.AddReserved(static_cast<int64_t>(rounded));
  return ptr;
}

void CudaCachingAllocator::Free(void* ptr, size_t bytes, MemoryCategory category) {
  if (ptr == nullptr) return;
  const size_t rounded = DeviceBlockBytes(bytes);
  absl::MutexLock lock(&mu_);
  auto owner = owner_.find(ptr);
  const cudaStream_t stream = owner == owner_.end() ? nullptr : owner->second;
  if (owner != owner_.end()) owner_.erase(owner);
  stats_.AddLive(category, -static_cast<int64_t>(bytes));
  stats_.cached_bytes += static_cast<int64_t>(rounded);
  cache_.emplace(std::make_pair(stream, rounded), ptr);
}

// An error the launch returns (an invalid pointer or stream, a lost device) is not sticky:
// a later synchronisation would not report it, so it goes to the owner now, and is taken
// off the thread's last error (the next kernel's launch check would name it as its own).
void CudaCachingAllocator::ZeroFill(void* ptr, size_t bytes) {
  const cudaError_t error = cudaMemsetAsync(ptr, 0, bytes, stream_of_caller_());
  if (error == cudaSuccess) return;
  cudaGetLastError();
  const absl::Status status =
      CudaStatus(error, absl::StrCat("cudaMemsetAsync zeroing a ", bytes, "-byte block").c_str());
  if (on_error_) {
    on_error_(status);
  } else {
    LogError(LogContext(), status.ToString());
  }
}

MemoryStats CudaCachingAllocator::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void CudaCachingAllocator::ResetPeaks() {
  absl::MutexLock lock(&mu_);
  stats_.ResetPeaks();
}

void CudaCachingAllocator::ReleaseCache() {
  absl::MutexLock releasing(&release_mu_);
  ReleaseCacheWhileReleasing();
}

void CudaCachingAllocator::ReleaseCacheWhileReleasing() {
  std::vector<Block> blocks;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, ptr] : cache_) blocks.emplace_back(key.second, ptr);
    cache_.clear();
    stats_.cached_bytes = 0;
  }
  if (blocks.empty()) return;
  // A cached block may still be in use by work queued before its Free.
  cudaDeviceSynchronize();
  for (const auto& [rounded, ptr] : blocks) cudaFree(ptr);
  absl::MutexLock lock(&mu_);
  for (const auto& [rounded, ptr] : blocks) stats_.AddReserved(-static_cast<int64_t>(rounded));
}

int64_t CudaCachingAllocator::device_allocations() const {
  absl::MutexLock lock(&mu_);
  return device_allocations_;
}

}  // namespace shardwise::cuda
