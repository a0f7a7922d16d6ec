#ifndef SHARDWISE_WORKER_DAEMON_WORKER_METRICS_H_
#define SHARDWISE_WORKER_DAEMON_WORKER_METRICS_H_

// A worker daemon's metrics (its --metrics_address; docs/operations.md, "Metrics"):
// whether it runs a rank, that rank's progress (step, loss, speed, memory peaks), the
// bytes its ranks moved through each kind of collective (from their progress, as
// `describe` counts them), the collectives themselves and their time
// (CollectiveMetrics), its attempts by outcome and its sessions with the coordinator.
//
// Thread-safety: every method may be called from any thread.

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "proto/worker_service.pb.h"
#include "worker/comm/collective_metrics.h"

namespace shardwise {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(MetricsRegistry* registry);

  CollectiveMetrics* collectives() { return &collectives_; }
  // Every report the worker's rank sends: progress moves the gauges and byte counters;
  // COMPLETED and ABORTED end the attempt.
  void OnReport(const v1::AttemptReport& report);
  // An attempt starts (busy; the progress gauges at 0 until its first progress), or ends
  // without a report (refused before it started: idle, at 0).
  void OnAttemptStarted();
  void OnAttemptEnded();
  void OnSessionOpened();

 private:
  // The progress gauges are the rank's now: 0 while it has none (idle, or starting).
  void ClearProgress();
  // A report's progress: the gauges, and what the byte counters have not counted yet.
  void RecordProgress(const v1::AttemptReport& report);

  CollectiveMetrics collectives_;
  Gauge& busy_;
  Gauge& step_;
  Gauge& loss_;
  Gauge& steps_per_second_;
  Gauge& tokens_per_second_;
  Family<Gauge>& peak_memory_;
  Family<Counter>& bytes_;
  Family<Counter>& attempts_;
  Counter& sessions_;

  absl::Mutex mu_;
  // The attempt whose progress was last counted, and its byte counts then.
  std::string attempt_ ABSL_GUARDED_BY(mu_);
  v1::Progress counted_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_WORKER_METRICS_H_
