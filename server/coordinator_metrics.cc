#include "server/coordinator_metrics.h"

namespace shardwise {

CoordinatorMetrics::CoordinatorMetrics(MetricsRegistry* registry)
    : registry(registry),
      worker_message_seconds(registry->AddHistogram(
          "shardwise_coordinator_worker_message_seconds",
          "Time from a worker message's arrival to the end of its handling, queueing included.",
          LatencyBuckets(), {"kind"})),
      state_commit_seconds(registry
                               ->AddHistogram("shardwise_coordinator_state_commit_seconds",
                                              "One state-file transaction, fsync included.",
                                              LatencyBuckets())
                               .With({})),
      worker_sessions_total(registry->AddCounter("shardwise_coordinator_worker_sessions_total",
                                                 "Worker sessions asked for, by outcome.",
                                                 {"outcome"})),
      failure_detections_total(registry->AddCounter(
          "shardwise_coordinator_failure_detections_total",
          "Workers declared lost, by how the loss was detected.", {"reason"})) {}

}  // namespace shardwise
