#ifndef SHARDWISE_WORKER_TESTING_ASYNC_CPU_DEVICE_H_
#define SHARDWISE_WORKER_TESTING_ASYNC_CPU_DEVICE_H_

// The stream-ordering checker: a Device that computes what the CPU device computes, but
// runs each operation later, on an emulated stream (emulated_stream.h), as a GPU does,
// so that code written for the CUDA device can be checked for missing stream dependencies
// on any machine. It keeps the CUDA device's streams and rules (device.h, "Ordering";
// cuda/cuda_device.h):
// - four streams, compute, unshard, post-backward (kReduction) and all-reduce, each a
//   thread that runs its operations in the order they were issued, with seeded random
//   pauses between them; a host thread issues on the compute stream until it calls
//   UseCommunicationStream;
// - only what the code declares orders work across streams: a fence (RecordFence) is a
//   task that marks its point passed, WaitForFence a task that waits for that mark, and
//   the host waits only in Synchronize, WaitForFenceOnHost, CopyToHost and
//   MultiplyAndCheckFinite (for the caller's stream, as cudaStreamSynchronize);
// - CopyFromHost takes its source at the call, as a copy from pageable memory does;
// - the CUDA device's type rules, which its kernels enforce at launch: an elementwise or
//   norm kernel's activations share one stored type (cuda/storage_elements.cuh), a norm's
//   weights are FP32 or that type, a fused attention's inputs share one (and its
//   gradients one), a GEMM's values are FP32 or its operands' type
//   (cuda/typed_operand.h, cuda/blas.h); the first breach is the device's error, as the
//   failed launch would be;
// - memory from StreamPoolAllocator: per-stream pools, poisoned on reuse.
// A run on it must equal the same run on the CPU device bit for bit; a result that differs,
// or changes with the seed, names an ordering bug the GPU would have
// (fsdp/stream_ordering_test.cc). It reports itself as a CUDA device, since it stands in
// for one (AsyncCpuRankDevices makes the rest of a rank).
//
// Thread-safety: as Device.

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/compute/device.h"
#include "worker/testing/emulated_stream.h"
#include "worker/testing/stream_pool_allocator.h"

namespace shardwise::testing {

class AsyncCpuDevice final : public Device {
 public:
  // `low_precision_storage` as CpuDevice's: a job's activations and unsharded parameters
  // in its 16-bit param_dtype, as the CUDA device keeps them.
  explicit AsyncCpuDevice(const StreamTiming& timing, bool low_precision_storage = false);
  // Runs every stream's work to its end first.
  ~AsyncCpuDevice() override;

  v1::DeviceKind kind() const override { return v1::CUDA; }
  Allocator* allocator() override { return &allocator_; }
  ScalarType StorageType(ScalarType compute) const override { return cpu_.StorageType(compute); }

  // The calling thread's stream, and a communication lane's.
  EmulatedStream& CurrentStream();
  EmulatedStream& LaneStream(CommLane lane);
  // Every stream has run what was issued on it so far.
  void DrainAll();
  // What `stream` runs from now on waits for what the calling thread's stream was issued
  // so far (an event recorded there and waited for on `stream`).
  void OrderAfterCaller(EmulatedStream& stream);
  // The reverse: what the calling thread's stream runs from now on waits for what
  // `stream` was issued so far.
  void OrderCallerAfter(EmulatedStream& stream);

  void UseCommunicationStream(CommLane lane) override;
  std::shared_ptr<Fence> RecordFence() override;
  void WaitForFence(const Fence* fence) override;
  absl::Status WaitForFenceOnHost(const Fence* fence) override;
  bool FencePassed(const Fence* fence) override;
  absl::Status Synchronize() override;
  absl::Status status() const override;

#include "worker/compute/device_overrides.inc"

 private:
  // Runs `operation` on the calling thread's stream, after what it issued before.
  void Later(std::function<void()> operation) { CurrentStream().Enqueue(std::move(operation)); }
  // The type rules (above), checked as the operation is issued; absent values (null) are
  // not checked.
  void RequireSharedType(const char* operation, std::initializer_list<ConstTensorRef> values);
  void RequireGemmTypes(const char* operation, ScalarType operands,
                        std::initializer_list<ConstTensorRef> values);
  // A norm's weights: those present of one type, FP32 or the rows' (the CUDA norms read
  // them in place).
  void RequireNormWeights(const char* operation, ConstTensorRef rows,
                          std::initializer_list<ConstTensorRef> weights);
  void KeepFirstError(absl::Status error);

  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the first type rule broken
  const uint64_t id_;                        // which device a thread's stream binding names
  CpuCachingAllocator scratch_;              // the CPU operations' own temporary buffers
  CpuDevice cpu_;
  StreamPoolAllocator allocator_;
  // Last: destroyed first, each running what it holds (which uses cpu_ and allocator_).
  EmulatedStream compute_, unshard_, post_backward_, all_reduce_;
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_TESTING_ASYNC_CPU_DEVICE_H_
