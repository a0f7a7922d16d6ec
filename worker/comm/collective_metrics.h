#ifndef SHARDWISE_WORKER_COMM_COLLECTIVE_METRICS_H_
#define SHARDWISE_WORKER_COMM_COLLECTIVE_METRICS_H_

// How many collectives of each kind a worker's ranks ran, and the time spent in them
// (waiting for peers included), for the worker's metrics endpoint. The bytes they moved
// come from the ranks' progress (worker_metrics.h), counted as `describe` counts them.
//
// Thread-safety: Record may be called from any thread.

#include "absl/time/time.h"
#include "common/metrics.h"

namespace shardwise {

class CollectiveMetrics {
 public:
  explicit CollectiveMetrics(MetricsRegistry* registry);
  // `kind`: "all-gather", "reduce-scatter", "all-reduce", "broadcast" or "barrier".
  void Record(const char* kind, absl::Duration took);

 private:
  Family<Counter>& calls_;
  Family<Counter>& seconds_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_COLLECTIVE_METRICS_H_
