// Whose data plane is at fault when every rank of an attempt reached the rendezvous but
// some had not connected to their peers by the join deadline (a firewall dropping one
// worker's data-plane port, a --data_address its peers cannot route to): each rank's
// worker probes its peers' probe listeners (worker/comm/data_plane_probe.h) and answers;
// the ranks no other rank reached are blamed (server/data_plane_blame.h), their workers
// quarantined and the job re-queued without a restart counted, so the next attempt lands
// elsewhere, well before the data plane's own timeout would have failed the attempt and
// blamed whichever rank reported first.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"
#include "contracts/job_state.h"
#include "server/data_plane_blame.h"
#include "server/job_controller.h"

namespace shardwise {
namespace {

// How long each worker's connections to its peers may take, and how much longer the
// coordinator waits for the answers before it judges with those it has.
constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
constexpr absl::Duration kAnswerGrace = absl::Seconds(3);

}  // namespace

bool JobController::ProbeDataPlaneLocked(const v1::Job& job, LiveAttempt& live, absl::Time now) {
  std::vector<v1::DataPlaneProbe::Target> targets;
  for (const v1::RankAssignment& rank : job.ranks()) {
    auto worker = workers_->Get(rank.worker_id());
    if (!worker.ok() || worker->data_probe_address().empty()) return false;
    v1::DataPlaneProbe::Target target;
    target.set_rank(rank.rank());
    target.set_address(worker->data_probe_address());
    targets.push_back(target);
  }
  live.probes.clear();
  live.probe_deadline = now + kProbeTimeout + kAnswerGrace;
  for (const v1::RankAssignment& rank : job.ranks()) {
    v1::CoordinatorMessage message;
    v1::DataPlaneProbe* probe = message.mutable_probe();
    probe->set_job_id(job.id());
    probe->set_attempt(job.attempt());
    probe->set_rank(rank.rank());
    probe->set_timeout_ms(absl::ToInt64Milliseconds(kProbeTimeout));
    for (const v1::DataPlaneProbe::Target& target : targets) {
      if (target.rank() != rank.rank()) *probe->add_targets() = target;
    }
    workers_->Send(rank.worker_id(), message);
  }
  return true;
}

void JobController::OnProbeResult(const std::string& worker_id,
                                  const v1::DataPlaneProbeResult& result) {
  absl::MutexLock lock(&mu_);
  auto live = live_.find(result.job_id());
  if (live == live_.end() || live->second.attempt != result.attempt() ||
      live->second.probe_deadline == absl::InfiniteFuture()) {
    return;  // an attempt over, or a probe judged already
  }
  auto job = jobs_->Current(result.job_id());
  // Only the worker that holds the rank answers for it.
  if (!job.ok() || WorkerOfRank(*job, result.rank()) != worker_id) return;
  live->second.probes[result.rank()] = result;
  if (static_cast<int32_t>(live->second.probes.size()) == job->ranks_size()) {
    JudgeProbesLocked(*job, live->second, clock_.Now());
  }
}

void JobController::CheckProbeDeadlinesLocked(absl::Time now) {
  std::vector<v1::Job> due;
  for (const auto& [job_id, live] : live_) {
    if (live.probe_deadline > now) continue;
    auto job = jobs_->Current(job_id);
    if (job.ok() && job->attempt() == live.attempt) due.push_back(*job);
  }
  // Judging may re-queue the job (and change live_): after the scan.
  for (const v1::Job& job : due) {
    auto live = live_.find(job.id());
    if (live != live_.end()) JudgeProbesLocked(job, live->second, now);
  }
}

std::vector<std::string> JobController::RankHostsLocked(const v1::Job& job) {
  std::vector<std::string> hosts(job.ranks_size());
  for (const v1::RankAssignment& rank : job.ranks()) {
    auto worker = workers_->Get(rank.worker_id());
    if (!worker.ok() || rank.rank() < 0 || rank.rank() >= job.ranks_size()) continue;
    const std::optional<HostPort> address = SplitHostPort(worker->data_probe_address());
    if (address.has_value()) hosts[rank.rank()] = address->host;
  }
  return hosts;
}

void JobController::JudgeProbesLocked(const v1::Job& job, LiveAttempt& live, absl::Time now) {
  live.probe_deadline = absl::InfiniteFuture();
  const std::vector<UnreachableRank> blamed =
      BlameUnreachableRanks(job.ranks_size(), live.probes, RankHostsLocked(job));
  if (blamed.empty()) {
    RecordJobEvent(
        job,
        absl::StrCat("the data-plane probes of ", live.probes.size(), " of ", job.ranks_size(),
                     " ranks found no rank that the others cannot reach; the data plane's own "
                     "timeout decides"),
        "recording a data-plane probe");
    return;
  }
  std::vector<int32_t> ranks;
  std::vector<std::string> why;
  for (const UnreachableRank& unreachable : blamed) {
    ranks.push_back(unreachable.rank);
    auto worker = workers_->Get(WorkerOfRank(job, unreachable.rank));
    why.push_back(absl::StrCat("rank ", unreachable.rank, " at ",
                               worker.ok() ? worker->data_probe_address() : "?", " tried by ",
                               TriedBy(unreachable)));
  }
  QuarantineLocked(job, ranks,
                   absl::StrCat("could not be reached over the data plane by any other rank (",
                                absl::StrJoin(why, "; "),
                                "): is a firewall dropping its data-plane ports, or does its "
                                "--data_address not route from its peers?"),
                   now);
}

}  // namespace shardwise
