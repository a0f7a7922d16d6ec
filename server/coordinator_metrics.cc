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
      failure_detections_total(
          registry->AddCounter("shardwise_coordinator_failure_detections_total",
                               "Workers declared lost, by how the loss was detected.", {"reason"})),
      stalls_total(registry->AddCounter(
          "shardwise_coordinator_stalls_total",
          "Collectives in which ranks waited past --stall_warning_ms for ranks that had not "
          "entered them: reported, or past --stall_abort_ms and aborted.",
          {"outcome"})),
      membership_changes_total(registry->AddCounter(
          "shardwise_coordinator_membership_changes_total",
          "Membership epochs of fault-tolerant attempts: replica groups that left after a "
          "loss (lost), a drained worker's leave (left) or a scale-down (scaled_down); groups "
          "that joined in place of ranks that had left (healed) or as new ranks (grown).",
          {"cause"})) {}

}  // namespace shardwise
