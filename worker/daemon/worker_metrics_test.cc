#include "worker/daemon/worker_metrics.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// The value of shardwise_worker_device_memory_peak_bytes{kind=KIND} as a scrape shows it;
// -1 where the series is not there.
double PeakGauge(const MetricsRegistry& registry, const std::string& kind) {
  const std::string series =
      absl::StrCat("shardwise_worker_device_memory_peak_bytes{kind=\"", kind, "\"} ");
  for (absl::string_view line : absl::StrSplit(registry.Exposition(), '\n')) {
    if (!absl::ConsumePrefix(&line, series)) continue;
    double value = 0;
    return absl::SimpleAtod(line, &value) ? value : -1;
  }
  return -1;
}

v1::AttemptReport ProgressReport(v1::AttemptPhase phase, int64_t step) {
  v1::AttemptReport report;
  report.set_job_id("job-1");
  report.set_attempt(1);
  report.set_phase(phase);
  report.mutable_progress()->set_step(step);
  return report;
}

// The peak gauges hold the running attempt's: set by each progress that carries peaks,
// kept through a report that carries none (a leaving rank's), and back to 0 when the next
// attempt starts, not showing the last one's until its first step.
TEST(WorkerMetrics, ThePeakMemoryGaugesHoldTheRunningAttempts) {
  MetricsRegistry registry;
  WorkerMetrics metrics(&registry);
  metrics.OnAttemptStarted();
  EXPECT_EQ(PeakGauge(registry, "allocated"), 0);

  v1::AttemptReport progress = ProgressReport(v1::PROGRESS, 3);
  progress.mutable_progress()->set_peak_allocated_bytes(1000);
  progress.mutable_progress()->set_peak_reserved_bytes(1536);
  metrics.OnReport(progress);
  EXPECT_EQ(PeakGauge(registry, "allocated"), 1000);
  EXPECT_EQ(PeakGauge(registry, "reserved"), 1536);

  metrics.OnReport(ProgressReport(v1::LEAVING, 4));
  EXPECT_EQ(PeakGauge(registry, "allocated"), 1000);
  EXPECT_EQ(PeakGauge(registry, "reserved"), 1536);

  metrics.OnAttemptStarted();
  EXPECT_EQ(PeakGauge(registry, "allocated"), 0);
  EXPECT_EQ(PeakGauge(registry, "reserved"), 0);
}

// The value of the unlabelled series `name` as a scrape shows it; -1 where it is not there.
double Series(const MetricsRegistry& registry, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(registry.Exposition(), '\n')) {
    if (!absl::ConsumePrefix(&line, name + " ")) continue;
    double value = 0;
    return absl::SimpleAtod(line, &value) ? value : -1;
  }
  return -1;
}

// An idle worker shows no job's progress (its last job's speed summed into a pool's
// figures), and an attempt's start shows none of the last one's; the bytes of the last
// report are counted still.
TEST(WorkerMetrics, ProgressGaugesHoldTheRunningAttemptsOnly) {
  MetricsRegistry registry;
  WorkerMetrics metrics(&registry);
  metrics.OnAttemptStarted();
  v1::AttemptReport progress = ProgressReport(v1::PROGRESS, 3);
  progress.mutable_progress()->set_loss(2.5);
  progress.mutable_progress()->set_tokens_per_second(1000);
  progress.mutable_progress()->set_all_gather_bytes(100);
  metrics.OnReport(progress);
  EXPECT_EQ(Series(registry, "shardwise_worker_busy"), 1);
  EXPECT_EQ(Series(registry, "shardwise_worker_step"), 3);
  EXPECT_EQ(Series(registry, "shardwise_worker_tokens_per_second"), 1000);

  v1::AttemptReport completed = ProgressReport(v1::COMPLETED, 4);
  completed.mutable_progress()->set_all_gather_bytes(250);
  metrics.OnReport(completed);
  EXPECT_EQ(Series(registry, "shardwise_worker_busy"), 0);
  for (const char* gauge :
       {"shardwise_worker_step", "shardwise_worker_loss", "shardwise_worker_tokens_per_second"}) {
    EXPECT_EQ(Series(registry, gauge), 0) << gauge;
  }
  EXPECT_EQ(Series(registry, "shardwise_worker_collective_bytes_total{kind=\"all_gather\"}"), 250);

  metrics.OnAttemptStarted();
  metrics.OnAttemptEnded();  // refused before it started
  EXPECT_EQ(Series(registry, "shardwise_worker_busy"), 0);
}

}  // namespace
}  // namespace shardwise
