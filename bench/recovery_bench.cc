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

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
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
#include "bench/load/coordinator_process.h"
#include "bench/load/spawn.h"
#include "client/client.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, coordinator_binary, "", "the shardwise-coordinator to run");
ABSL_FLAG(std::string, worker_binary, "", "the shardwise-worker to run");
ABSL_FLAG(std::string, dir, "/tmp/shardwise-recovery-bench", "state, logs, data and models");
ABSL_FLAG(int64_t, steps, 200, "steps of each job");
ABSL_FLAG(int64_t, kill_at, 80, "rank 1's worker is killed once the job is past this step");
ABSL_FLAG(int64_t, checkpoint_interval, 25, "the restarted job's checkpoint interval");

namespace shardwise::bench {
namespace {

// The job's progress as the client saw it, polled every few milliseconds.
struct Sample {
  absl::Time at;
  int32_t attempt = 0;
  int64_t step = 0;
};

// When the job (in `attempt`, or any with 0) was first seen at `step` or beyond.
absl::Time FirstAt(const std::vector<Sample>& samples, int64_t step, int32_t attempt = 0) {
  for (const Sample& s : samples) {
    if (s.step >= step && (attempt == 0 || s.attempt == attempt)) return s.at;
  }
  return absl::InfiniteFuture();
}

// Steps per second between steps `from` and `to` (of one attempt).
double Rate(const std::vector<Sample>& samples, int64_t from, int64_t to, int32_t attempt) {
  const absl::Duration took = FirstAt(samples, to, attempt) - FirstAt(samples, from, attempt);
  return static_cast<double>(to - from) / absl::ToDoubleSeconds(took);
}

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
  std::ifstream log(log_path);
  std::string line;
  while (std::getline(log, line)) {
    const size_t failed = line.find(" failed (");
    const size_t from = line.find(" train on from step ");
    const size_t after = line.rfind(" after ");
    if (failed == std::string::npos || from == std::string::npos || after == std::string::npos) {
      continue;
    }
    Recovery recovery;
    std::string error;
    const size_t step_at = line.rfind("step ", failed) + 5;
    if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", line.substr(0, line.find(' ')),
                         &recovery.logged_at, &error) ||
        !absl::SimpleAtoi(line.substr(step_at, failed - step_at), &recovery.failed_step) ||
        !absl::SimpleAtoi(line.substr(from + 20, after - from - 20), &recovery.resumed_step) ||
        !absl::ParseDuration(line.substr(after + 7), &recovery.rebuild)) {
      return absl::DataLossError(absl::StrCat("cannot read the recovery line: ", line));
    }
    return recovery;
  }
  return absl::NotFoundError(absl::StrCat("no recovery line in ", log_path));
}

class RecoveryBench {
 public:
  absl::Status Start() {
    const std::string dir = absl::GetFlag(FLAGS_dir);
    ASSIGN_OR_RETURN(coordinator_,
                     load::CoordinatorProcess::Start(
                         absl::GetFlag(FLAGS_coordinator_binary), dir,
                         {"--allowed_input_paths=" + dir, "--allowed_output_paths=" + dir}));
    client_ = std::make_unique<Client>(coordinator_->address());
    for (const char* name : {"w0", "w1", "w2"}) RETURN_IF_ERROR(AddWorker(name));
    return absl::OkStatus();
  }

  absl::Status AddWorker(const std::string& name) {
    ASSIGN_OR_RETURN(
        workers_[name],
        load::SpawnLogged({absl::GetFlag(FLAGS_worker_binary),
                           "--coordinator=" + coordinator_->address(), "--name=" + name},
                          absl::StrCat(absl::GetFlag(FLAGS_dir), "/worker-", name, ".log")));
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      auto workers = client_->ListWorkers();
      if (workers.ok()) {
        for (const v1::WorkerInfo& w : *workers) {
          if (w.id() == name && w.state() == v1::IDLE) return absl::OkStatus();
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return absl::DeadlineExceededError(absl::StrCat("worker ", name, " did not register"));
  }

  // Submits `spec`, kills rank 1's worker past --kill_at (and calls `after_kill`), and
  // follows the job to SUCCEEDED; its samples, and when and at which step the kill came.
  absl::StatusOr<v1::Job> RunWithKill(const v1::JobSpec& spec, std::vector<Sample>* samples,
                                      absl::Time* killed_at, int64_t* killed_step,
                                      std::string* survivor_log,
                                      const std::function<absl::Status()>& after_kill) {
    ASSIGN_OR_RETURN(const std::string job_id, client_->Submit(spec));
    bool killed = false;
    const absl::Time deadline = absl::Now() + absl::Minutes(10);
    while (absl::Now() < deadline) {
      ASSIGN_OR_RETURN(const v1::Job job, client_->Get(job_id));
      samples->push_back({absl::Now(), job.attempt(), job.progress().step()});
      if (job.state() == v1::SUCCEEDED) return job;
      if (job.state() == v1::FAILED || job.state() == v1::CANCELLED) {
        return absl::AbortedError(
            absl::StrCat(job_id, " ended ", v1::JobState_Name(job.state()), ": ", job.reason()));
      }
      if (!killed && job.progress().step() > absl::GetFlag(FLAGS_kill_at)) {
        const std::string victim = job.ranks(1).worker_id();
        *survivor_log =
            absl::StrCat(absl::GetFlag(FLAGS_dir), "/worker-", job.ranks(0).worker_id(), ".log");
        *killed_step = job.progress().step();
        *killed_at = absl::Now();
        kill(workers_.at(victim), SIGKILL);
        waitpid(workers_.at(victim), nullptr, 0);
        workers_.erase(victim);
        killed = true;
        RETURN_IF_ERROR(after_kill());
      }
      absl::SleepFor(absl::Milliseconds(2));
    }
    return absl::DeadlineExceededError(absl::StrCat(job_id, " did not end within 10 minutes"));
  }

  ~RecoveryBench() {
    for (const auto& [name, pid] : workers_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

 private:
  std::unique_ptr<load::CoordinatorProcess> coordinator_;
  std::unique_ptr<Client> client_;
  std::map<std::string, pid_t> workers_;
};

absl::Status MeasureFaultTolerance(RecoveryBench& bench) {
  v1::JobSpec spec = Spec(absl::GetFlag(FLAGS_dir), "tolerant");
  spec.mutable_fault_tolerance()->set_min_replicas(1);
  spec.mutable_fault_tolerance()->set_batch(v1::FaultTolerance::KEEP_GLOBAL);
  // Degraded to the end, on one rank: the spare stays for the restart run.
  spec.mutable_fault_tolerance()->set_heal(false);
  std::vector<Sample> samples;
  absl::Time killed_at;
  int64_t killed_step = 0;
  std::string survivor_log;
  RETURN_IF_ERROR(bench
                      .RunWithKill(spec, &samples, &killed_at, &killed_step, &survivor_log,
                                   [] { return absl::OkStatus(); })
                      .status());
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

absl::Status MeasureRestart(RecoveryBench& bench) {
  v1::JobSpec spec = Spec(absl::GetFlag(FLAGS_dir), "restarted");
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_output()->set_checkpoint_dir(absl::GetFlag(FLAGS_dir) + "/checkpoints");
  spec.mutable_output()->set_checkpoint_interval_steps(absl::GetFlag(FLAGS_checkpoint_interval));
  std::vector<Sample> samples;
  absl::Time killed_at;
  int64_t killed_step = 0;
  std::string survivor_log;
  ASSIGN_OR_RETURN(const v1::Job job,
                   bench.RunWithKill(spec, &samples, &killed_at, &killed_step, &survivor_log,
                                     [&] { return bench.AddWorker("w3"); }));
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
  RecoveryBench bench;
  absl::Status status = bench.Start();
  if (status.ok()) status = MeasureFaultTolerance(bench);
  if (status.ok()) status = MeasureRestart(bench);
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
