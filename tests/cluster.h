#ifndef SHARDWISE_TESTS_CLUSTER_H_
#define SHARDWISE_TESTS_CLUSTER_H_

// A real local cluster for integration tests: the shardwise-coordinator and
// shardwise-worker binaries run as child processes on loopback, with a real SQLite file;
// tests talk to them through the real client library or CLI, and kill, stop and restart
// them with signals.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/client.h"

namespace shardwise::testing {

// A file's whole contents ("" if it cannot be read): logs, models.
std::string ReadWholeFile(const std::string& path);

// A job's event messages, one a line: for a failure's message, or to search.
std::string JobEventLog(const v1::Job& job);
// Whether one of the job's event messages holds `text`.
bool HasEvent(const v1::Job& job, absl::string_view text);

// Runs `command` with /bin/sh; returns its exit code and puts its stdout and stderr
// together in `output`.
int RunShell(const std::string& command, std::string* output);

// A child process whose output goes to a log file. Killed (SIGKILL) when destroyed.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log_path);
  ~Process();
  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // Kills with SIGKILL and reaps.
  void Kill();
  // Waits for exit; returns the exit code (or 128 + signal).
  int Wait();
  bool Running();
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int exit_code_ = 0;
  std::string log_path_;
};

struct ClusterOptions {
  int64_t heartbeat_interval_ms = 200;
  int64_t heartbeat_timeout_ms = 30000;
  int64_t collective_timeout_ms = 30000;
  int64_t hook_switch_lead_ms = 2000;
  int64_t stall_warning_ms = 60000;
  int64_t stall_abort_ms = 0;
  int64_t reattach_grace_ms = 30000;
  std::string state_file;  // default: DIR/state.db
  // The coordinator's --allowed_input_paths and --allowed_output_paths; empty: the test's
  // scratch folder ($TEST_TMPDIR), where the tests keep their data and outputs.
  std::vector<std::string> allowed_input_paths;
  std::vector<std::string> allowed_output_paths;
  // Security (tests/security_test): flags added to the coordinator's command line and to
  // every worker's, and how the cluster's own client connects (its CA, an admin token).
  std::vector<std::string> coordinator_flags;
  std::vector<std::string> worker_flags;
  ClientOptions client;
  // The coordinator serves /metrics on a free port (Cluster::coordinator_metrics_port).
  bool coordinator_metrics = false;
  // The coordinator serves its plaintext health port (Cluster::health_port).
  bool health_port = false;
};

class Cluster {
 public:
  explicit Cluster(const ClusterOptions& options = {});
  ~Cluster();

  // Starts the coordinator (on the same port and state file as before, after the first
  // start) and waits until it serves.
  void StartCoordinator();
  void KillCoordinator();  // SIGKILL: as a crash
  // SIGTERM, as a rolling update or an eviction sends, and waits for it to exit; its
  // exit status.
  int StopCoordinator();
  // With ClusterOptions::coordinator_metrics: the port of its /metrics (0 if none).
  int coordinator_metrics_port() const;
  // With ClusterOptions::health_port: the port of the coordinator's plaintext health.
  int health_port() const { return health_port_; }
  pid_t coordinator_pid() const { return coordinator_->pid(); }

  // Starts a worker named `name` and waits until it is connected (IDLE, or BUSY already
  // with a job that was waiting) at the coordinator; with `wait` false, returns at once.
  // `flags` are added to its command line; `launcher` (e.g. prlimit and its options)
  // runs it.
  Process& AddWorker(const std::string& name, const std::vector<std::string>& flags = {},
                     const std::vector<std::string>& launcher = {}, bool wait = true);
  Process& worker(const std::string& name) { return *workers_.at(name); }

  Client& client() { return *client_; }
  std::string address() const;
  const std::string& dir() const { return dir_; }
  static std::string BinaryPath(const std::string& target);

  // Polls `condition` every 20 ms until it holds or `timeout` passes.
  static bool WaitFor(const std::function<bool()>& condition,
                      absl::Duration timeout = absl::Seconds(20));
  // Waits until the job is in `state`, or has ended in another (which fails the test at
  // once); returns the job as last seen. `timeout` only bounds a job that never gets
  // there: tests give one generous for a loaded machine, and assert on events and states,
  // not on how fast they came.
  v1::Job WaitForState(const std::string& job_id, v1::JobState state,
                       absl::Duration timeout = absl::Seconds(60));
  // Waits until the job's progress reaches `step`; false if it did not within `timeout`.
  bool WaitForStep(const std::string& job_id, int64_t step,
                   absl::Duration timeout = absl::Seconds(20));
  // The worker with id `name` as the coordinator lists it; nullopt when not listed (or
  // the list failed).
  std::optional<v1::WorkerInfo> Worker(const std::string& name);
  v1::WorkerState WorkerState(const std::string& name);

  // A valid spec for the bootstrap: synthetic data, SGD.
  static v1::JobSpec Spec(int world_size);
  // `spec` with its model replaced by a two-layer GPT (32 wide, 2 heads, a context of 32)
  // over `vocab_size` tokens, trained on the token file `train_path`.
  static v1::JobSpec WithSmallGpt(v1::JobSpec spec, int64_t vocab_size,
                                  const std::string& train_path);

  // Runs the `shardwise` CLI with `args`; returns its exit code and puts stdout and
  // stderr together in `output`.
  static int RunCli(const std::vector<std::string>& args, std::string* output);

 private:
  const ClusterOptions options_;
  std::string dir_;
  int port_ = 0;
  int health_port_ = 0;
  int coordinator_starts_ = 0;
  std::unique_ptr<Process> coordinator_;
  std::map<std::string, std::unique_ptr<Process>> workers_;
  std::unique_ptr<Client> client_;
};

}  // namespace shardwise::testing

#endif  // SHARDWISE_TESTS_CLUSTER_H_
