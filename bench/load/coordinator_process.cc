#include "bench/load/coordinator_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/load/spawn.h"
#include "common/metrics.h"
#include "common/status_macros.h"
#include "httplib.h"

namespace shardwise::load {
namespace {

int ReadPort(const std::string& path) {
  std::ifstream file(path);
  int port = 0;
  file >> port;
  return port;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorProcess>> CoordinatorProcess::Start(
    const std::string& binary, const std::string& dir, const std::vector<std::string>& flags) {
  std::unique_ptr<CoordinatorProcess> process(new CoordinatorProcess());
  const std::string port_file = dir + "/port";
  const std::string metrics_port_file = dir + "/metrics-port";
  process->log_path_ = dir + "/coordinator.log";
  std::vector<std::string> argv = {binary,
                                   "--address=127.0.0.1:0",
                                   "--metrics_address=127.0.0.1:0",
                                   "--state_file=" + dir + "/state.db",
                                   "--port_file=" + port_file,
                                   "--metrics_port_file=" + metrics_port_file};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ASSIGN_OR_RETURN(const pid_t pid, SpawnLogged(std::move(argv), process->log_path_));
  process->pid_ = pid;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    process->port_ = ReadPort(port_file);
    process->metrics_port_ = ReadPort(metrics_port_file);
    if (process->port_ > 0 && process->metrics_port_ > 0) return process;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      process->pid_ = -1;
      return absl::UnavailableError(
          absl::StrCat("the coordinator exited at start; see ", process->log_path_));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the coordinator did not serve within 30 s; see ", process->log_path_));
}

CoordinatorProcess::~CoordinatorProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

absl::StatusOr<ProcessStats> CoordinatorProcess::Stats() const {
  ProcessStats stats;
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    int64_t value = 0;
    if (absl::StartsWith(line, "Threads:")) {
      (void)absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(8)), &stats.threads);
    } else if (absl::StartsWith(line, "VmRSS:")) {
      std::string kb(absl::StripAsciiWhitespace(line.substr(6)));
      if (absl::SimpleAtoi(absl::StripSuffix(kb, " kB"), &value)) stats.rss_bytes = value * 1024;
    }
  }
  if (stats.threads == 0) return absl::NotFoundError("the coordinator is not running");
  // Fields 14 and 15 of /proc/PID/stat, after the parenthesised command name.
  std::ifstream stat_file(absl::StrCat("/proc/", pid_, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const std::vector<std::string> fields =
      absl::StrSplit(stat.substr(stat.rfind(')') + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (fields.size() > 12 && absl::SimpleAtoi(fields[11], &utime) &&
      absl::SimpleAtoi(fields[12], &stime)) {
    stats.cpu_seconds = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  }
  return stats;
}

absl::StatusOr<std::map<std::string, double>> CoordinatorProcess::ScrapeMetrics() const {
  httplib::Client client("127.0.0.1", metrics_port_);
  client.set_read_timeout(10, 0);
  auto response = client.Get("/metrics");
  if (!response || response->status != 200) {
    return absl::UnavailableError("cannot scrape the coordinator's metrics");
  }
  return ParseExposition(response->body);
}

namespace {

// The buckets of one histogram series: (upper bound, cumulative count), ascending.
std::vector<std::pair<double, double>> Buckets(const std::map<std::string, double>& metrics,
                                               const std::string& name, const std::string& labels) {
  std::vector<std::pair<double, double>> buckets;
  const std::string prefix =
      absl::StrCat(name, "_bucket{", labels, labels.empty() ? "" : ",", "le=\"");
  for (auto it = metrics.lower_bound(prefix); it != metrics.end(); ++it) {
    if (!absl::StartsWith(it->first, prefix)) break;
    std::string bound(absl::StripSuffix(it->first.substr(prefix.size()), "\"}"));
    double le = 0;
    if (bound == "+Inf") {
      le = INFINITY;
    } else if (!absl::SimpleAtod(bound, &le)) {
      continue;
    }
    buckets.push_back({le, it->second});
  }
  std::sort(buckets.begin(), buckets.end());
  return buckets;
}

}  // namespace

double HistogramQuantile(const std::map<std::string, double>& metrics, const std::string& name,
                         const std::string& labels, double q) {
  const auto buckets = Buckets(metrics, name, labels);
  if (buckets.empty() || buckets.back().second == 0) return 0;
  const double rank = q * buckets.back().second;
  double lower = 0, below = 0;
  for (const auto& [le, count] : buckets) {
    if (count >= rank && count > below) {
      if (std::isinf(le)) return lower;
      return lower + (le - lower) * (rank - below) / (count - below);
    }
    lower = std::isinf(le) ? lower : le;
    below = count;
  }
  return lower;
}

double HistogramMaxBound(const std::map<std::string, double>& metrics, const std::string& name,
                         const std::string& labels) {
  const auto buckets = Buckets(metrics, name, labels);
  double below = 0, lower = 0;
  double max = 0;
  for (const auto& [le, count] : buckets) {
    if (count > below) max = std::isinf(le) ? lower : le;
    below = count;
    lower = std::isinf(le) ? lower : le;
  }
  return max;
}

}  // namespace shardwise::load
