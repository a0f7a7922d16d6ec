#ifndef SHARDWISE_WORKER_TESTING_STREAM_POOL_ALLOCATOR_H_
#define SHARDWISE_WORKER_TESTING_STREAM_POOL_ALLOCATOR_H_

// The stream-ordering checker's allocator (async_cpu_device.h): host memory handed out as
// the CUDA caching allocator hands out device memory (cuda/cuda_allocator.h), with every
// use that a GPU would not order made visible.
//
// - Blocks are sized as the CUDA allocator sizes them (DeviceBlockBytes), so nearby
//   sizes share blocks as they do on a GPU.
// - Each block belongs to the stream of the thread that allocated it and goes back, when
//   freed, to that stream's pool at once (the host does not wait), to be handed out again
//   only to an allocation on the same stream: as CUDA's allocator (and PyTorch's) keeps
//   per-stream pools, reuse is ordered after the owner stream's earlier work only.
// - A block handed out again is first filled with poison (all bits set: NaN in floating
//   point, -1 in integers) where its stream stands: at once if the stream has run all it
//   was given, else by a task on it, ahead of the new owner's work. Another stream that
//   still reads the block, or writes it, without being ordered against that point, does
//   so around the fill and sees or leaves NaNs: a missing dependency shows as a wrong
//   result. (The rule is stricter than a GPU in one case: a block handed out on a busy
//   stream and first written by another stream must have the writer ordered after the
//   allocating stream, even where the busy stream's pending work does not touch it.)
// - A new block is poison too (device memory is not initialised); ZeroFill is a task on
//   the caller's stream, as cudaMemsetAsync is.
// Counters per category as every Allocator keeps them.
//
// Thread-safety: an allocator may be used from any thread.

#include <cstddef>
#include <functional>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "worker/runtime/memory.h"
#include "worker/testing/emulated_stream.h"

namespace shardwise::testing {

class StreamPoolAllocator final : public Allocator {
 public:
  // `stream_of_caller` names the calling thread's stream.
  explicit StreamPoolAllocator(std::function<EmulatedStream*()> stream_of_caller)
      : stream_of_caller_(std::move(stream_of_caller)) {}
  // The streams must have run every task that touches a block (their owner drains them).
  ~StreamPoolAllocator() override;

  void* Allocate(size_t bytes, MemoryCategory category) override;
  void Free(void* ptr, size_t bytes, MemoryCategory category) override;
  void ZeroFill(void* ptr, size_t bytes) override;
  MemoryStats Stats() const override;
  void ResetPeaks() override;

  static constexpr unsigned char kPoison = 0xff;

 private:
  // Fills a block handed out again with poison, in `stream`'s order.
  static void Poison(EmulatedStream* stream, void* block, size_t bytes);
  // A cached block of `bytes` (rounded) in `stream`'s pool, or null.
  void* TakeCached(EmulatedStream* stream, size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<EmulatedStream*()> stream_of_caller_;
  mutable absl::Mutex mu_;
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::pair<EmulatedStream*, size_t>, void*> cache_ ABSL_GUARDED_BY(mu_);
  std::map<void*, EmulatedStream*> blocks_ ABSL_GUARDED_BY(mu_);  // every block: its owner
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_STREAM_POOL_ALLOCATOR_H_
