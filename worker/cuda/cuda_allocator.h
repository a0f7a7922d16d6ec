#ifndef SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_
#define SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_

// The caching device allocator: the CUDA implementation of runtime/memory.h's Allocator,
// with the same live/peak counters per category as the CPU one. Freed blocks stay cached
// by size (FSDP allocates the same sizes every step, and cudaMalloc/cudaFree synchronise
// the device), and go back to the driver when an allocation would otherwise fail.
//
// Each block belongs to the stream of the thread that allocated it (`stream_of_caller`,
// as PyTorch's allocator keeps per-stream pools) and is reused only by allocations on
// that stream, so reuse is ordered after every earlier use on it. A block used by another
// stream must be freed only once that stream's work on it is complete (FsdpModel frees
// after a synchronisation; limit_all_gathers' free events order the rest). Zero fills are
// enqueued on the caller's stream.
//
// Thread-safety: an allocator may be used from any thread.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/runtime/memory.h"

namespace shardwise::cuda {

class CudaCachingAllocator final : public Allocator {
 public:
  // Receives a zero fill that could not be enqueued: the block is then not zero, and
  // whatever reads it would compute on garbage, so the owner fails its work with it.
  using ErrorSink = std::function<void(const absl::Status&)>;

  // Allocates on the current device; `stream_of_caller` names the calling thread's stream.
  // Without `on_error`, a failed zero fill is logged as an error.
  explicit CudaCachingAllocator(std::function<cudaStream_t()> stream_of_caller,
                                ErrorSink on_error = nullptr)
      : stream_of_caller_(std::move(stream_of_caller)), on_error_(std::move(on_error)) {}
  // Every thread on one stream.
  explicit CudaCachingAllocator(cudaStream_t stream)
      : CudaCachingAllocator([stream] { return stream; }) {}
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
  using Block = std::pair<size_t, void*>;  // rounded size, pointer
  // A cached block of `rounded` bytes of `stream`, or null.
  void* TakeCached(cudaStream_t stream, size_t rounded) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // cudaMalloc, after releasing the cache once if the device is full; throws
  // AllocationFailure. Called without the lock: the driver may wait for the device.
  void* AllocateFromDevice(size_t rounded, MemoryCategory category)
      ABSL_LOCKS_EXCLUDED(mu_, release_mu_);
  // cudaMalloc of a full device, once more after any release in progress (its frees may
  // have made the room), then after releasing the cache itself.
  cudaError_t RetryAfterRelease(void** ptr, size_t rounded) ABSL_LOCKS_EXCLUDED(mu_, release_mu_);
  // Empties the cache under the lock, then synchronises and frees the blocks without it:
  // a thread holding the lock while the device drains would stop this rank's other
  // threads from issuing the collectives its in-flight NCCL kernels wait for.
  void ReleaseCacheWhileReleasing() ABSL_EXCLUSIVE_LOCKS_REQUIRED(release_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);

  const std::function<cudaStream_t()> stream_of_caller_;
  const ErrorSink on_error_;
  // One release of the cache at a time, from its emptying to its last cudaFree: a thread
  // whose cudaMalloc fails while another releases waits for it, rather than find the
  // cache empty and report out of memory before the other's frees land.
  absl::Mutex release_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  // Free blocks by (stream, rounded size); the stream of every block handed out.
  std::multimap<std::pair<cudaStream_t, size_t>, void*> cache_ ABSL_GUARDED_BY(mu_);
  std::map<void*, cudaStream_t> owner_ ABSL_GUARDED_BY(mu_);
  int64_t device_allocations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDA_ALLOCATOR_H_
