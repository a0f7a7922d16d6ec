#ifndef SHARDWISE_BENCH_LOAD_LOCAL_CLUSTER_H_
#define SHARDWISE_BENCH_LOAD_LOCAL_CLUSTER_H_

// A coordinator and named worker daemons as child processes on loopback, for the
// benchmarks that measure real training jobs through faults (recovery_bench, heal_bench):
// the coordinator's state and every daemon's log in one folder, the workers killed
// (SIGKILL) on demand and when this object goes.

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load/coordinator_process.h"
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
