#include "worker/daemon/worker_metrics.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace shardwise {

WorkerMetrics::WorkerMetrics(MetricsRegistry* registry)
    : collectives_(registry),
      busy_(
          registry->AddGauge("shardwise_worker_busy", "1 while the worker runs a rank.").With({})),
      step_(registry->AddGauge("shardwise_worker_step", "Steps its rank has completed.").With({})),
      loss_(registry->AddGauge("shardwise_worker_loss", "Its rank's latest loss.").With({})),
      steps_per_second_(
          registry->AddGauge("shardwise_worker_steps_per_second", "Its rank's training speed.")
              .With({})),
      tokens_per_second_(registry
                             ->AddGauge("shardwise_worker_tokens_per_second",
                                        "Tokens per second of its job, all ranks (GPT).")
                             .With({})),
      peak_memory_(registry->AddGauge(
          "shardwise_worker_device_memory_peak_bytes",
          "Its rank's device memory at its peak this attempt, as its caching allocator counts "
          "it: the most bytes live at once (allocated) and the most held, cached blocks "
          "included (reserved).",
          {"kind"})),
      bytes_(registry->AddCounter(
          "shardwise_worker_collective_bytes_total",
          "Bytes through its ranks' collectives, by kind (full buffer sizes, as nccl-tests "
          "count them).",
          {"kind"})),
      attempts_(registry->AddCounter("shardwise_worker_attempts_total",
                                     "Attempts its ranks ended, by outcome.", {"outcome"})),
      sessions_(registry
                    ->AddCounter("shardwise_worker_sessions_total",
                                 "Sessions it opened with the coordinator.")
                    .With({})) {}

void WorkerMetrics::OnAttemptStarted() {
  busy_.Set(1);
  ClearProgress();
  // The peaks are this attempt's: the last one's go until its first progress.
  peak_memory_.With({"allocated"}).Set(0);
  peak_memory_.With({"reserved"}).Set(0);
}

void WorkerMetrics::OnAttemptEnded() {
  busy_.Set(0);
  ClearProgress();
}

void WorkerMetrics::ClearProgress() {
  for (Gauge* gauge : {&step_, &loss_, &steps_per_second_, &tokens_per_second_}) gauge->Set(0);
}

void WorkerMetrics::OnSessionOpened() { sessions_.Increment(); }

void WorkerMetrics::OnReport(const v1::AttemptReport& report) {
  const bool ended = report.phase() == v1::COMPLETED || report.phase() == v1::ABORTED;
  if (ended) {
    attempts_.With({report.phase() == v1::COMPLETED ? "completed" : "aborted"}).Increment();
  }
  if (report.has_progress() && report.progress().step() != 0) RecordProgress(report);
  if (ended) OnAttemptEnded();  // an idle worker shows no job's progress
}

void WorkerMetrics::RecordProgress(const v1::AttemptReport& report) {
  const v1::Progress& progress = report.progress();
  step_.Set(static_cast<double>(progress.step()));
  loss_.Set(progress.loss());
  steps_per_second_.Set(progress.steps_per_second());
  tokens_per_second_.Set(progress.tokens_per_second());
  if (progress.peak_allocated_bytes() > 0) {  // a LEAVING report's progress has none
    peak_memory_.With({"allocated"}).Set(static_cast<double>(progress.peak_allocated_bytes()));
    peak_memory_.With({"reserved"}).Set(static_cast<double>(progress.peak_reserved_bytes()));
  }
  absl::MutexLock lock(&mu_);
  const std::string attempt = absl::StrCat(report.job_id(), "#", report.attempt());
  if (attempt != attempt_) {
    attempt_ = attempt;
    counted_ = v1::Progress();
  }
  // The progress holds the attempt's totals: the counters take what is new (never less
  // than nothing: a counter that went back would read as a reset to Prometheus).
  auto added = [](int64_t now, int64_t before) { return std::max<int64_t>(0, now - before); };
  bytes_.With({"all_gather"})
      .Increment(added(progress.all_gather_bytes(), counted_.all_gather_bytes()));
  bytes_.With({"reduce_scatter"})
      .Increment(added(progress.reduce_scatter_bytes(), counted_.reduce_scatter_bytes()));
  bytes_.With({"all_reduce"})
      .Increment(added(progress.all_reduce_bytes(), counted_.all_reduce_bytes()));
  counted_ = progress;
}

}  // namespace shardwise
