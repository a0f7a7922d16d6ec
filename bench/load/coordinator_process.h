#ifndef SHARDWISE_BENCH_LOAD_COORDINATOR_PROCESS_H_
#define SHARDWISE_BENCH_LOAD_COORDINATOR_PROCESS_H_

// A shardwise-coordinator started as a child process for the load generator: on loopback,
// with a fresh state file and its metrics served, killed when this object goes. Reads
// what the kernel says of it (threads, memory, CPU time) and what its /metrics says.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise::load {

struct ProcessStats {
  int threads = 0;
  int64_t rss_bytes = 0;
  double cpu_seconds = 0;  // user + system since the process started
};

class CoordinatorProcess {
 public:
  // Starts `binary` with its state and log in `dir`, plus `flags`; waits until it serves.
  static absl::StatusOr<std::unique_ptr<CoordinatorProcess>> Start(
      const std::string& binary, const std::string& dir, const std::vector<std::string>& flags);
  ~CoordinatorProcess();

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  absl::StatusOr<ProcessStats> Stats() const;
  // GET /metrics, parsed into "name{labels}" -> value.
  absl::StatusOr<std::map<std::string, double>> ScrapeMetrics() const;

 private:
  CoordinatorProcess() = default;

  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string log_path_;
};

// The q-quantile of the histogram `name` with `labels` (e.g. kind="heartbeat") in
// `metrics`, interpolated within its bucket as Prometheus does; and the upper bound of
// the highest bucket that holds an observation (the maximum, to a bucket's precision).
double HistogramQuantile(const std::map<std::string, double>& metrics, const std::string& name,
                         const std::string& labels, double q);
double HistogramMaxBound(const std::map<std::string, double>& metrics, const std::string& name,
                         const std::string& labels);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_COORDINATOR_PROCESS_H_
