#ifndef SHARDWISE_WORKER_CUDA_STREAM_H_
#define SHARDWISE_WORKER_CUDA_STREAM_H_

// CUDA streams and events as owned values, and the streams FSDP uses: compute (the
// default for forward/backward), unshard (all-gathers, high priority so a prefetch is not
// starved by compute), post-backward (reduce-scatters, high priority) and all-reduce (the
// replicate group's all-reduce of HYBRID strategies, after the reduce-scatter). Work moves
// between them only through events (Stream::WaitFor), never through host waits.
//
// Thread-safety: a stream may be used from any thread; an event by one at a time.

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"

namespace shardwise::cuda {

// The GPU Shardwise's code last made current on the calling thread; -1 while it has made
// none. (The runtime's cudaGetDevice answers 0 on a thread that never chose a GPU, and
// cudaSetDevice creates that GPU's context: giving such a thread "back" GPU 0 would have
// the worker of GPU 3 hold memory on GPU 0.)
inline thread_local int thread_gpu = -1;

// cudaSetDevice(gpu) for the calling thread, remembered in thread_gpu.
inline cudaError_t SetThreadGpu(int gpu) {
  const cudaError_t error = cudaSetDevice(gpu);
  if (error == cudaSuccess) thread_gpu = gpu;
  return error;
}

// Makes `gpu` the calling thread's current device for the scope, then gives the thread
// back the GPU Shardwise had made current on it, if any (a thread that had none stays on
// `gpu`, whose context exists already): a thread that only visits a GPU (to query its
// events, or to destroy a device made elsewhere) keeps its own binding.
class ScopedCurrentGpu {
 public:
  explicit ScopedCurrentGpu(int gpu) : previous_(thread_gpu) {
    if (previous_ == gpu) {
      previous_ = -1;  // nothing to restore
      return;
    }
    SetThreadGpu(gpu);
  }
  ~ScopedCurrentGpu() {
    if (previous_ >= 0) SetThreadGpu(previous_);
  }
  ScopedCurrentGpu(const ScopedCurrentGpu&) = delete;
  ScopedCurrentGpu& operator=(const ScopedCurrentGpu&) = delete;

 private:
  int previous_;
};

class Event {
 public:
  // Timing off: the cheapest event, for ordering and completion only.
  static absl::StatusOr<Event> Create(bool timing = false);
  Event() = default;
  ~Event();
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  absl::Status Record(cudaStream_t stream);
  // Whether everything recorded before it has run; an error the query reports (a failed
  // kernel before it, say) is returned, not read as done.
  absl::StatusOr<bool> Done() const;
  absl::Status Synchronize();
  // Milliseconds between two timing events, both completed.
  static absl::StatusOr<float> ElapsedMs(const Event& start, const Event& end);
  cudaEvent_t get() const { return event_; }

 private:
  explicit Event(cudaEvent_t event) : event_(event) {}
  cudaEvent_t event_ = nullptr;
};

class Stream {
 public:
  // Non-blocking (no implicit order with the legacy default stream). Priority: 0 is the
  // default; lower numbers run first (see cudaDeviceGetStreamPriorityRange).
  static absl::StatusOr<Stream> Create(int priority = 0);
  Stream() = default;
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  // Work enqueued on this stream after the call waits for `event`.
  absl::Status WaitFor(const Event& event);
  absl::Status Synchronize();
  cudaStream_t get() const { return stream_; }

 private:
  explicit Stream(cudaStream_t stream) : stream_(stream) {}
  cudaStream_t stream_ = nullptr;
};

struct FsdpStreams {
  Stream compute, unshard, post_backward, all_reduce;
  static absl::StatusOr<FsdpStreams> Create();
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_STREAM_H_
