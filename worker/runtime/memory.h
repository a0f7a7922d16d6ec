#ifndef SHARDWISE_WORKER_RUNTIME_MEMORY_H_
#define SHARDWISE_WORKER_RUNTIME_MEMORY_H_

// Memory for the training runtime: a caching allocator that counts live and peak bytes
// per category. The counters are how memory claims (e.g. "FULL_SHARD holds a shard plus
// the units in flight") are tested; the cache keeps freed blocks for reuse, because FSDP
// allocates and frees the same sizes every step.
//
// Thread-safety: an allocator may be used from any thread.

#include <algorithm>
#include <array>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <new>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise {

enum class MemoryCategory {
  kParameters = 0,  // sharded parameters and unsharded (all-gathered) parameters
  kGradients,
  kOptimizerState,
  kActivations,
  kCommunication,  // staging buffers of collectives
};
inline constexpr int kMemoryCategories = 5;
const char* MemoryCategoryName(MemoryCategory category);

// An allocator's counters. Live bytes count what was asked for, per category; reserved
// bytes what the allocator holds from the system or the driver (live blocks and its cache,
// as allocated, rounding included): the memory the process really uses.
struct MemoryStats {
  std::array<int64_t, kMemoryCategories> live_bytes{};
  std::array<int64_t, kMemoryCategories> peak_bytes{};
  int64_t peak_live_bytes = 0;  // the most live at once, all categories together
  int64_t cached_bytes = 0;     // freed, held for reuse, counted in no category
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;

  int64_t live(MemoryCategory c) const { return live_bytes[static_cast<int>(c)]; }
  int64_t peak(MemoryCategory c) const { return peak_bytes[static_cast<int>(c)]; }
  int64_t live_total() const;

  // The bookkeeping every allocator shares: `bytes` more live in `c` (negative: freed),
  // `bytes` more held from the system (negative: given back); peaks restart from now.
  void AddLive(MemoryCategory c, int64_t bytes);
  void AddReserved(int64_t bytes);
  void ResetPeaks();
};

// What an allocator throws when it cannot allocate: how much, of what, where. The
// runtime's allocations happen in constructors (Buffer), so failure is an exception; the
// attempt runner and the communication threads turn it into a status
// (AllocationFailureStatus), so a worker survives it and its attempt fails naming it.
// `fault`, when not empty, says the allocation failed for another reason than memory (a
// device that faulted earlier).
class AllocationFailure : public std::bad_alloc {
 public:
  // `reason`, when not empty, says why memory ran out (a limit that refused it).
  AllocationFailure(size_t bytes, MemoryCategory category, const char* device,
                    const std::string& fault = "", const std::string& reason = "");
  const char* what() const noexcept override { return message_.c_str(); }
  bool out_of_memory() const { return out_of_memory_; }

 private:
  std::string message_;
  bool out_of_memory_;
};

// RESOURCE_EXHAUSTED saying what could not be allocated (any std::bad_alloc; INTERNAL for
// an AllocationFailure with a fault), and, when given, what was being done ("loading the
// initial weights").
absl::Status AllocationFailureStatus(const std::bad_alloc& failure,
                                     const std::string& activity = "");

// The size of the block a device's caching allocator hands out for `bytes` (at least 1):
// whole 512-byte granules. The CUDA allocator and the CPU's stream-ordering checker,
// which must share blocks between the same sizes, both round by it.
inline size_t DeviceBlockBytes(size_t bytes) {
  constexpr size_t kGranule = 512;
  return (std::max<size_t>(bytes, 1) + kGranule - 1) / kGranule * kGranule;
}

// Device-neutral: the CPU implementation is below; a CUDA one adds the same counters.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* Allocate(size_t bytes, MemoryCategory category) = 0;
  virtual void Free(void* ptr, size_t bytes, MemoryCategory category) = 0;
  // Sets `bytes` bytes at `ptr` (from Allocate) to zero: memset on the host; on a device,
  // enqueued on the allocator's stream.
  virtual void ZeroFill(void* ptr, size_t bytes) { std::memset(ptr, 0, bytes); }
  virtual MemoryStats Stats() const = 0;
  virtual void ResetPeaks() = 0;
};

// What the host lets the process add before it is killed for memory (-1: no limit):
// host_memory.h's ThisCgroupMemoryBeforeOomKill, a pod's limit. Within a cgroup, Linux
// grants every allocation and its OOM killer ends the process when the memory is used;
// an allocator that asks first fails the attempt with what it could not allocate instead.
using HostHeadroom = std::function<int64_t()>;

class CpuCachingAllocator final : public Allocator {
 public:
  // Allocations of kHeadroomCheckedBytes or more are refused (AllocationFailure) when
  // `headroom`, after the cache is given back, cannot take them and kHeadroomReserve
  // (what the allocator does not see: communication buffers, stacks, the data's reads).
  // Empty: nothing is checked.
  static constexpr size_t kHeadroomCheckedBytes = size_t{1} << 20;
  static constexpr int64_t kHeadroomReserve = int64_t{64} << 20;
  explicit CpuCachingAllocator(HostHeadroom headroom = nullptr) : headroom_(std::move(headroom)) {}
  ~CpuCachingAllocator() override;

  void* Allocate(size_t bytes, MemoryCategory category) override;
  void Free(void* ptr, size_t bytes, MemoryCategory category) override;
  MemoryStats Stats() const override;
  void ResetPeaks() override;
  // Returns cached blocks to the system.
  void ReleaseCache();

 private:
  // Throws AllocationFailure when `bytes`, fresh from the system, would pass the headroom.
  void CheckHeadroom(size_t bytes, MemoryCategory category);

  const HostHeadroom headroom_;
  mutable absl::Mutex mu_;
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
  std::multimap<size_t, void*> cache_ ABSL_GUARDED_BY(mu_);  // by exact size
};

// An owned, typed block from an allocator, freed (returned to the allocator) on
// destruction or Reset(). Movable, not copyable. FP32 unless a type is given.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Allocator* allocator, size_t numel, MemoryCategory category, bool zero = true)
      : Buffer(allocator, numel, category, ScalarType::kFloat32, zero) {}
  Buffer(Allocator* allocator, size_t numel, MemoryCategory category, ScalarType type,
         bool zero = true);
  ~Buffer() { Reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void Reset();
  bool empty() const { return data_ == nullptr; }
  size_t numel() const { return numel_; }
  size_t bytes() const { return numel_ * ElementSize(type_); }
  ScalarType type() const { return type_; }
  // The elements as FP32 (the buffer must be FP32), or as any type's storage.
  float* data() {
    assert(type_ == ScalarType::kFloat32);
    return as<float>();
  }
  const float* data() const {
    assert(type_ == ScalarType::kFloat32);
    return as<float>();
  }
  // The elements with their type, as the Device takes them (runtime/tensor_ref.h).
  TensorRef ref() { return {data_, type_}; }
  ConstTensorRef ref() const { return {data_, type_}; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }

 private:
  Allocator* allocator_ = nullptr;
  void* data_ = nullptr;
  size_t numel_ = 0;
  MemoryCategory category_ = MemoryCategory::kParameters;
  ScalarType type_ = ScalarType::kFloat32;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_MEMORY_H_
