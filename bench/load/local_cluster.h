#ifndef SHARDWISE_BENCH_LOAD_LOCAL_CLUSTER_H_
#define SHARDWISE_BENCH_LOAD_LOCAL_CLUSTER_H_

// A coordinator and named worker daemons as child processes on loopback, for the
// benchmarks that measure real training jobs through faults (recovery_bench, heal_bench):
// the coordinator's state and every daemon's log in one folder, the workers killed
// (SIGKILL) on demand and when this object goes.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load/coordinator_process.h"
#include "bench/load/job_samples.h"
#include "client/client.h"

namespace shardwise::load {

class LocalCluster {
 public:
  // Starts the coordinator (inputs and outputs allowed under `dir`) and `workers`.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      const std::string& coordinator_binary, const std::string& worker_binary,
      const std::string& dir, const std::vector<std::string>& workers);
  ~LocalCluster();

  // Starts worker `name` with `flags` and waits until the coordinator has it IDLE.
  absl::Status AddWorker(const std::string& name, const std::vector<std::string>& flags = {});
  // SIGKILL, as a host that fails; the worker is reaped.
  void Kill(const std::string& name);
  std::string LogPath(const std::string& worker) const;
  Client& client() { return *client_; }

  // What RunWithKill saw: the job at its end, its progress polled every few milliseconds,
  // and when and past which step the kill came.
  struct KilledRun {
    v1::Job job;
    std::vector<Sample> samples;
    absl::Time killed_at;
    int64_t killed_step = -1;
  };
  // Submits `spec`, kills rank `victim`'s worker once the job is past step `kill_at`
  // (then calls `after_kill` with the job as it was), and follows the job to SUCCEEDED:
  // ABORTED if it ends otherwise, DEADLINE_EXCEEDED after 10 minutes.
  absl::StatusOr<KilledRun> RunWithKill(
      const v1::JobSpec& spec, int64_t kill_at, int32_t victim,
      const std::function<absl::Status(const v1::Job&)>& after_kill);

 private:
  LocalCluster(std::string worker_binary, std::string dir)
      : worker_binary_(std::move(worker_binary)), dir_(std::move(dir)) {}

  const std::string worker_binary_;
  const std::string dir_;
  std::unique_ptr<CoordinatorProcess> coordinator_;
  std::unique_ptr<Client> client_;
  std::map<std::string, pid_t> workers_;
};

// A daemon's log line: when it was written, and its text.
struct LogLine {
  absl::Time at;
  std::string text;
};

// The first line of the log at `path` that contains `needle`; NOT_FOUND if none.
absl::StatusOr<LogLine> FindLogLine(const std::string& path, const std::string& needle);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_LOCAL_CLUSTER_H_
