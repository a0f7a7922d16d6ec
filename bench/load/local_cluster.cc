#include "bench/load/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/spawn.h"
#include "common/status_macros.h"

namespace shardwise::load {

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const std::string& coordinator_binary, const std::string& worker_binary, const std::string& dir,
    const std::vector<std::string>& workers) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(worker_binary, dir));
  ASSIGN_OR_RETURN(
      cluster->coordinator_,
      CoordinatorProcess::Start(coordinator_binary, dir,
                                {"--allowed_input_paths=" + dir, "--allowed_output_paths=" + dir}));
  cluster->client_ = std::make_unique<Client>(cluster->coordinator_->address());
  for (const std::string& name : workers) RETURN_IF_ERROR(cluster->AddWorker(name));
  return cluster;
}

LocalCluster::~LocalCluster() {
  for (const auto& [name, pid] : workers_) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
}

absl::Status LocalCluster::AddWorker(const std::string& name,
                                     const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {worker_binary_, "--coordinator=" + coordinator_->address(),
                                   "--name=" + name};
  argv.insert(argv.end(), flags.begin(), flags.end());
  ASSIGN_OR_RETURN(workers_[name], SpawnLogged(argv, LogPath(name)));
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    auto listed = client_->ListWorkers();
    if (listed.ok()) {
      for (const v1::WorkerInfo& w : *listed) {
        if (w.id() == name && w.state() == v1::IDLE) return absl::OkStatus();
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("worker ", name, " did not register"));
}

void LocalCluster::Kill(const std::string& name) {
  auto it = workers_.find(name);
  if (it == workers_.end()) return;
  kill(it->second, SIGKILL);
  waitpid(it->second, nullptr, 0);
  workers_.erase(it);
}

absl::StatusOr<LocalCluster::KilledRun> LocalCluster::RunWithKill(
    const v1::JobSpec& spec, int64_t kill_at, int32_t victim,
    const std::function<absl::Status(const v1::Job&)>& after_kill) {
  ASSIGN_OR_RETURN(const std::string job_id, client_->Submit(spec));
  KilledRun run;
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  while (absl::Now() < deadline) {
    ASSIGN_OR_RETURN(run.job, client_->Get(job_id));
    const v1::Job& job = run.job;
    run.samples.push_back({absl::Now(), job.attempt(), job.progress().step()});
    if (job.state() == v1::SUCCEEDED) return run;
    if (job.state() == v1::FAILED || job.state() == v1::CANCELLED) {
      return absl::AbortedError(
          absl::StrCat(job_id, " ended ", v1::JobState_Name(job.state()), ": ", job.reason()));
    }
    if (run.killed_step < 0 && job.progress().step() > kill_at) {
      run.killed_step = job.progress().step();
      run.killed_at = absl::Now();
      Kill(job.ranks(victim).worker_id());
      RETURN_IF_ERROR(after_kill(job));
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  return absl::DeadlineExceededError(absl::StrCat(job_id, " did not end within 10 minutes"));
}

std::string LocalCluster::LogPath(const std::string& worker) const {
  return absl::StrCat(dir_, "/worker-", worker, ".log");
}

absl::StatusOr<LogLine> FindLogLine(const std::string& path, const std::string& needle) {
  std::ifstream log(path);
  std::string line;
  while (std::getline(log, line)) {
    if (line.find(needle) == std::string::npos) continue;
    LogLine found;
    std::string error;
    if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", line.substr(0, line.find(' ')), &found.at,
                         &error)) {
      return absl::DataLossError(absl::StrCat(path, ": a line without its time: ", line));
    }
    found.text = std::move(line);
    return found;
  }
  return absl::NotFoundError(absl::StrCat("no line with '", needle, "' in ", path));
}

}  // namespace shardwise::load
