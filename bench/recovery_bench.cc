// A lost worker, handled by fault tolerance and by today's checkpoint restart, on real
// processes: a coordinator and worker daemons on loopback training the GPT benchmark
// model (bench/gpt_bench.cc's: 4 layers, 256 wide, 128 context, byte tokens of the
// license texts), NO_SHARD over 2 ranks. Rank 1's worker is killed (SIGKILL) once the job
// is past step --kill_at.
//  - fault_tolerance (batch KEEP_GLOBAL): detection (the kill to the survivor's failed
//    collective), the rebuild (the next epoch's connections and state, from the
//    survivor's log line "step S failed (...); membership epoch 1: ... after T"), the
//    time until training is past the kill's step, the steps computed again, and the
//    tokens/s while degraded against before (the live replicas' share, G'/G, is 1/2).
//  - without: restart_policy 1, a checkpoint every --checkpoint_interval steps, and a
//    replacement worker started at once (as Kubernetes restarts a pod): the time until
//    the second attempt is past the kill's step, and the steps computed again.
// bench/fault_tolerance.sh recovery runs it and records its table in bench/RESULTS.md.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_model.h"
#include "bench/load/job_samples.h"
#include "bench/load/local_cluster.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, coordinator_binary, "", "the shardwise-coordinator to run");
ABSL_FLAG(std::string, worker_binary, "", "the shardwise-worker to run");
ABSL_FLAG(std::string, dir, "/tmp/shardwise-recovery-bench", "state, logs, data and models");
ABSL_FLAG(int64_t, steps, 200, "steps of each job");
ABSL_FLAG(int64_t, kill_at, 80, "rank 1's worker is killed once the job is past this step");
ABSL_FLAG(int64_t, checkpoint_interval, 25, "the restarted job's checkpoint interval");

namespace shardwise::bench {
namespace {

using load::FirstAt;
using load::Rate;
using load::Sample;

v1::JobSpec Spec(const std::string& dir, const std::string& name) {
  v1::JobSpec spec;
  spec.set_name(name);
  *spec.mutable_model()->mutable_gpt() = BenchGpt();
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path(WriteLicenseTokens(dir + "/tokens.bin"));
  spec.set_global_batch_size(16);
  spec.set_steps(absl::GetFlag(FLAGS_steps));
  spec.set_world_size(2);
  spec.mutable_output()->set_final_model_path(absl::StrCat(dir, "/", name, ".safetensors"));
  spec.mutable_output()->set_overwrite(true);
  return spec;
}

// What the survivor logged of its recovery.
struct Recovery {
  absl::Time logged_at;
  int64_t failed_step = -1;
  int64_t resumed_step = -1;
  absl::Duration rebuild;
};

absl::StatusOr<Recovery> ReadRecovery(const std::string& log_path) {
  ASSIGN_OR_RETURN(const load::LogLine line, load::FindLogLine(log_path, " train on from step "));
  const std::string& text = line.text;
  const size_t failed = text.find(" failed (");
  const size_t from = text.find(" train on from step ");
  const size_t after = text.rfind(" after ");
  Recovery recovery;
  recovery.logged_at = line.at;
  if (failed == std::string::npos || after == std::string::npos) {
    return absl::DataLossError(absl::StrCat("not a recovery line: ", text));
  }
  const size_t step_at = text.rfind("step ", failed) + 5;
  if (!absl::SimpleAtoi(text.substr(step_at, failed - step_at), &recovery.failed_step) ||
      !absl::SimpleAtoi(text.substr(from + 20, after - from - 20), &recovery.resumed_step) ||
      !absl::ParseDuration(text.substr(after + 7), &recovery.rebuild)) {
    return absl::DataLossError(absl::StrCat("cannot read the recovery line: ", text));
  }
  return recovery;
}

absl::Status MeasureFaultTolerance(load::LocalCluster& cluster) {
  v1::JobSpec spec = Spec(absl::GetFlag(FLAGS_dir), "tolerant");
  spec.mutable_fault_tolerance()->set_min_replicas(1);
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  // Degraded to the end, on one rank: the spare stays for the restart run.
  spec.mutable_fault_tolerance()->set_heal(false);
  std::string survivor_log;
  ASSIGN_OR_RETURN(const load::LocalCluster::KilledRun run,
                   cluster.RunWithKill(spec, absl::GetFlag(FLAGS_kill_at), /*victim=*/1,
                                       [&](const v1::Job& job) {
                                         survivor_log = cluster.LogPath(job.ranks(0).worker_id());
                                         return absl::OkStatus();
                                       }));
  const std::vector<Sample>& samples = run.samples;
  const absl::Time killed_at = run.killed_at;
  const int64_t killed_step = run.killed_step;
  ASSIGN_OR_RETURN(const Recovery recovery, ReadRecovery(survivor_log));
  const absl::Time failed_at = recovery.logged_at - recovery.rebuild;
  const int64_t kill_at = absl::GetFlag(FLAGS_kill_at);
  const double before = Rate(samples, kill_at - 40, kill_at, 1);
  const double degraded = Rate(samples, killed_step + 10, killed_step + 50, 1);
  // Steps the coordinator had heard done that ran again (none, when the survivors resume
  // at or past them), and whether the step in flight started over.
  const int64_t redone = std::max<int64_t>(0, killed_step - recovery.resumed_step);
  const std::string in_flight =
      recovery.resumed_step == recovery.failed_step
          ? absl::StrCat(" (step ", recovery.failed_step, ", in flight, started over)")
          : "";
  std::printf(
      "| fault_tolerance (KEEP_GLOBAL) | %lld | %.0f ms | %.0f ms | %.0f ms | %lld%s | %.2f / "
      "%.2f = %.2f (G'/G = 0.50) |\n",
      static_cast<long long>(killed_step), absl::ToDoubleMilliseconds(failed_at - killed_at),
      absl::ToDoubleMilliseconds(recovery.rebuild),
      absl::ToDoubleMilliseconds(FirstAt(samples, killed_step + 1) - killed_at),
      static_cast<long long>(redone), in_flight.c_str(), degraded, before, degraded / before);
  return absl::OkStatus();
}

absl::Status MeasureRestart(load::LocalCluster& cluster) {
  v1::JobSpec spec = Spec(absl::GetFlag(FLAGS_dir), "restarted");
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_output()->set_checkpoint_dir(absl::GetFlag(FLAGS_dir) + "/checkpoints");
  spec.mutable_output()->set_checkpoint_interval_steps(absl::GetFlag(FLAGS_checkpoint_interval));
  ASSIGN_OR_RETURN(const load::LocalCluster::KilledRun run,
                   cluster.RunWithKill(spec, absl::GetFlag(FLAGS_kill_at), /*victim=*/1,
                                       [&](const v1::Job&) { return cluster.AddWorker("w3"); }));
  const v1::Job& job = run.job;
  const std::vector<Sample>& samples = run.samples;
  const absl::Time killed_at = run.killed_at;
  const int64_t killed_step = run.killed_step;
  // The second attempt resumes from its newest checkpoint: the steps after it ran twice.
  const size_t at = job.result().find("resumed from the checkpoint of step ");
  int64_t resumed = -1;
  if (at == std::string::npos ||
      !absl::SimpleAtoi(
          job.result().substr(at + 36,
                              job.result().find_first_not_of("0123456789", at + 36) - at - 36),
          &resumed)) {
    return absl::DataLossError(absl::StrCat("no resumed step in the result: ", job.result()));
  }
  std::printf(
      "| checkpoint restart (every %lld steps, a replacement worker) | %lld | - | - | %.0f ms | "
      "%lld | - |\n",
      static_cast<long long>(absl::GetFlag(FLAGS_checkpoint_interval)),
      static_cast<long long>(killed_step),
      absl::ToDoubleMilliseconds(FirstAt(samples, killed_step + 1, 2) - killed_at),
      static_cast<long long>(killed_step - resumed));
  return absl::OkStatus();
}

int Main() {
  auto cluster = load::LocalCluster::Start(absl::GetFlag(FLAGS_coordinator_binary),
                                           absl::GetFlag(FLAGS_worker_binary),
                                           absl::GetFlag(FLAGS_dir), {"w0", "w1", "w2"});
  absl::Status status = cluster.status();
  if (status.ok()) status = MeasureFaultTolerance(**cluster);
  if (status.ok()) status = MeasureRestart(**cluster);
  if (!status.ok()) {
    std::fprintf(stderr, "recovery_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace shardwise::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return shardwise::bench::Main();
}
