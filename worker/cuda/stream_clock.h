#ifndef SHARDWISE_WORKER_CUDA_STREAM_CLOCK_H_
#define SHARDWISE_WORKER_CUDA_STREAM_CLOCK_H_

// The CUDA device's StreamClock (runtime/stream_clock.h): a mark is a timing event
// recorded on the calling thread's stream. CUDA times events against each other, not
// against the host's clock, so the clock keeps a reference event whose host time it
// measured (recorded on an idle stream of its own and waited for: the middle of the host
// times around that wait) and dates each mark by its distance to the reference it was
// recorded after. The reference is renewed every 10 s: the distance is a float of
// milliseconds, whose resolution falls as it grows (about 1 us at 10 s).
//
// Thread-safety: thread-safe. PassedAt never waits for the device; Record waits for it
// only for the first reference (a renewal is one thread's, outside the lock, while the
// others date their marks by the reference before).

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/cuda/event_pool.h"
#include "worker/cuda/stream.h"
#include "worker/runtime/stream_clock.h"

namespace shardwise::cuda {

class CudaStreamClock final : public StreamClock {
 public:
  // The calling thread's stream (binding the thread to the GPU) and its timeline lane.
  using CurrentStream = std::function<std::pair<cudaStream_t, int>()>;

  CudaStreamClock(int gpu, CurrentStream current_stream)
      : gpu_(gpu), current_stream_(std::move(current_stream)) {}

  // Null (no device span) if the event cannot be made or recorded.
  std::unique_ptr<Mark> Record(int* lane) override;
  std::optional<int64_t> PassedAt(const Mark& mark) override;

 private:
  struct Reference {
    Event event;
    int64_t host_us = 0;
  };
  struct EventMark;  // a timing event and the reference it is dated by

  // The reference to date new marks by, renewed when older than 10 s (by one thread at
  // a time, outside the lock).
  std::shared_ptr<const Reference> CurrentReference();
  // A new reference: recorded on the idle reference stream and waited for; null on a
  // failure. Only the renewing thread calls it.
  std::shared_ptr<const Reference> MakeReference();

  const int gpu_;
  const CurrentStream current_stream_;
  EventPool mark_events_{/*timing=*/true};  // two per span: reused, not made each time
  Stream reference_stream_;                 // the renewing thread's (renewing_)
  absl::Mutex mu_;
  bool renewing_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<const Reference> reference_ ABSL_GUARDED_BY(mu_);
  absl::Time reference_made_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_STREAM_CLOCK_H_
