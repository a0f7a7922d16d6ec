#ifndef SHARDWISE_WORKER_CUDA_EVENT_POOL_H_
#define SHARDWISE_WORKER_CUDA_EVENT_POOL_H_

// CUDA events, reused. Creating and destroying an event costs the host a driver call each,
// and a step records one per fence (every all-gather's and reduction's hand-over between
// streams) and two per timeline span. A lent event comes back when its last holder drops
// it and is recorded again by the next borrower. That is safe for what waited on it: a
// stream's wait (cudaStreamWaitEvent) and a query bind to the record made before them,
// not to later ones, and the event is lent again only once nobody holds it.
//
// Thread-safety: Acquire from any thread; events may be dropped on any thread, also after
// the pool is gone (its free list lives until the last event comes back).

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {

class EventPool {
 public:
  // `timing`: events that can time (Event::ElapsedMs), else the cheaper ordering-only ones.
  explicit EventPool(bool timing = false);

  // A free event of the pool, or a new one when none is free.
  absl::StatusOr<std::shared_ptr<Event>> Acquire();
  // Events created so far (the pool's size: free and lent).
  size_t created() const;

 private:
  struct Shared {
    explicit Shared(bool timing) : timing(timing) {}
    const bool timing;
    mutable absl::Mutex mu;
    std::vector<Event> free ABSL_GUARDED_BY(mu);
    size_t created ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<Shared> shared_;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_EVENT_POOL_H_
