#include "worker/comm/collective_metrics.h"

#include <string>

#include "absl/strings/str_replace.h"

namespace shardwise {

CollectiveMetrics::CollectiveMetrics(MetricsRegistry* registry)
    : calls_(registry->AddCounter("shardwise_worker_collectives_total",
                                  "Collectives the worker's ranks ran, by kind.", {"kind"})),
      seconds_(registry->AddCounter(
          "shardwise_worker_collective_seconds_total",
          "Time the worker's ranks spent inside collectives (waiting for peers included), by "
          "kind.",
          {"kind"})) {}

void CollectiveMetrics::Record(const char* kind, absl::Duration took) {
  const std::vector<std::string> label = {absl::StrReplaceAll(kind, {{"-", "_"}})};
  calls_.With(label).Increment();
  seconds_.With(label).Increment(absl::ToDoubleSeconds(took));
}

}  // namespace shardwise
