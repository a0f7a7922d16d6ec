#ifndef SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_
#define SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_

// The caching device allocator: the CUDA implementation of runtime/memory.h's Allocator,
// with the same live/peak counters per category as the CPU one. Freed blocks stay cached
// by size (FSDP allocates the same sizes every step, and cudaMalloc/cudaFree synchronise
// the device), and go back to the driver when an allocation would otherwise fail.
//
// Blocks are reused in the order of the allocator's stream, as PyTorch's allocator does
// for the stream a block was allocated on: a buffer that another stream still reads must
// not be freed before that stream's work is ordered before the allocator's stream (FSDP
// waits for the unshard or post-backward stream before it frees, and limit_all_gathers'
// free events do the same). Zero fills are enqueued on that stream.
//
// Thread-safety: an allocator may be used from any thread.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/runtime/memory.h"

namespace shardwise::cuda {

class CudaCachingAllocator final : public Allocator {
 public:
  // Allocates on the current device; orders zero fills on `stream`.
  explicit CudaCachingAllocator(cudaStream_t stream) : stream_(stream) {}
  ~CudaCachingAllocator() override;

  // Throws std::bad_alloc, as the CPU allocator does, when the device is out of memory
  // even after the cache was released; stderr names the request and the counters first.
  void* Allocate(size_t bytes, MemoryCategory category) override;
  void Free(void* ptr, size_t bytes, MemoryCategory category) override;
  void ZeroFill(void* ptr, size_t bytes) override;
  MemoryStats Stats() const override;
  void ResetPeaks() override;
  // Returns cached blocks to the driver.
  void ReleaseCache();

  // cudaMalloc calls so far (a warm cache makes none in steady state).
  int64_t device_allocations() const;

 private:
  static size_t RoundUp(size_t bytes);
  void ReleaseCacheLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const cudaStream_t stream_;
  mutable absl::Mutex mu_;
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  std::multimap<size_t, void*> cache_ ABSL_GUARDED_BY(mu_);  // by rounded size
  int64_t device_allocations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_
