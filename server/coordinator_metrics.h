#ifndef SHARDWISE_SERVER_COORDINATOR_METRICS_H_
#define SHARDWISE_SERVER_COORDINATOR_METRICS_H_

// The coordinator's metrics that its hot paths record into directly; the gauges of state
// kept elsewhere are filled by collectors (Coordinator::AddCollectors). docs/operations.md
// ("Metrics") lists every one.
//
// Thread-safety: recording is lock-free and may happen on any thread.

#include "common/metrics.h"

namespace shardwise {

struct CoordinatorMetrics {
  explicit CoordinatorMetrics(MetricsRegistry* registry);

  MetricsRegistry* const registry;
  // From a worker message's arrival to the end of its handling, queueing included:
  // heartbeat, report, hook_ack, register, session_open.
  Family<Histogram>& worker_message_seconds;
  // One state-file transaction, from BEGIN to COMMIT (fsync included).
  Histogram& state_commit_seconds;
  Family<Counter>& worker_sessions_total;     // by outcome: opened, refused, silent (no hello)
  Family<Counter>& failure_detections_total;  // reason: session_closed, heartbeat_timeout, ...
  Family<Counter>& stalls_total;              // outcome: reported, aborted
  // Fault-tolerant attempts' membership epochs, by cause: lost, left (drained), healed.
  Family<Counter>& membership_changes_total;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_COORDINATOR_METRICS_H_
