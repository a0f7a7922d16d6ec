// The rendezvous join deadline: every rank of a new attempt must have joined (reported
// JOINED: reached the rendezvous and connected to its peers) within the job's
// rendezvous.join_timeout_seconds. The rendezvous store knows which ranks made a call.
// When some ranks did and others never came, the ones that never came are to blame: their
// workers took the assignment and did not do it, and are quarantined, so the job's next
// attempt lands elsewhere. When no rank came, the fault is more likely the job's or the
// network's than every worker's: the attempt fails as any failure does. When every rank
// came but some have not connected yet, the coordinator probes the data plane between
// the ranks' workers (job_controller_probes.cc): a rank no other can reach is blamed and
// quarantined as one that never came; otherwise the data plane's own timeout decides.

#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_state.h"
#include "server/job_controller.h"
#include "server/requeue_bound.h"

namespace shardwise {
namespace {

// "rank 1 (worker w1)", "ranks 1 (worker w1) and 3 (worker w3)".
std::string RanksAndWorkers(const v1::Job& job, const std::vector<int32_t>& ranks) {
  std::vector<std::string> named;
  for (int32_t rank : ranks) {
    const std::string worker = WorkerOfRank(job, rank);
    named.push_back(absl::StrCat(rank, " (worker ", worker.empty() ? "?" : worker, ")"));
  }
  const std::string last = named.back();
  named.pop_back();
  return absl::StrCat(named.empty() ? "rank " : "ranks ", absl::StrJoin(named, ", "),
                      named.empty() ? "" : " and ", last);
}

std::string Within(const v1::Job& job) {
  return absl::StrCat(" within ", JoinTimeoutSeconds(job.spec()),
                      " s (rendezvous.join_timeout_seconds)");
}

}  // namespace

void JobController::CheckJoinDeadlinesLocked(absl::Time now) {
  struct Late {
    v1::Job job;
    std::set<int32_t> joined;
    std::vector<int32_t> never_reached;
  };
  std::vector<Late> late;
  for (auto& [job_id, live] : live_) {
    if (live.awaiting_reattach || now < live.join_deadline) continue;
    live.join_deadline = absl::InfiniteFuture();  // decided once per attempt
    auto job = jobs_->Current(job_id);
    if (!job.ok() || job->attempt() != live.attempt) continue;
    if (static_cast<int32_t>(live.joined.size()) >= job->spec().world_size()) continue;
    late.push_back({*job, live.joined, rendezvous_->RanksNotReached(job_id, live.attempt)});
  }
  // Ending an attempt (and the scheduling pass it may run) changes live_: after the scan.
  for (const Late& l : late) EndLateJoinLocked(l.job, l.joined, l.never_reached, now);
  CheckProbeDeadlinesLocked(now);
  // A quarantine that ended frees a worker no event announces.
  bool freed = false;
  while (!quarantine_ends_.empty() && *quarantine_ends_.begin() <= now) {
    quarantine_ends_.erase(quarantine_ends_.begin());
    freed = true;
  }
  if (!freed) return;
  // Not only when the state file is next loaded: a row is a live quarantine.
  LogIfFailed(jobs_->ForgetEndedQuarantines(), "forgetting ended quarantines");
  RequestScheduleLocked();
}

void JobController::EndLateJoinLocked(const v1::Job& job, const std::set<int32_t>& joined,
                                      const std::vector<int32_t>& never_reached, absl::Time now) {
  const int32_t world = job.spec().world_size();
  if (never_reached.empty()) {
    std::vector<int32_t> unjoined;
    for (int32_t rank = 0; rank < world; ++rank) {
      if (joined.count(rank) == 0) unjoined.push_back(rank);
    }
    auto live = live_.find(job.id());
    const bool probing = live != live_.end() && ProbeDataPlaneLocked(job, live->second, now);
    RecordJobEvent(
        job,
        absl::StrCat("every rank reached the rendezvous, but ", RanksAndWorkers(job, unjoined),
                     " had not connected to its peers", Within(job),
                     probing ? "; probing the data plane between the ranks' workers"
                             : " (a data-plane port blocked between workers?); the data plane's "
                               "own timeout decides"),
        "recording a late join");
    return;
  }
  if (static_cast<int32_t>(never_reached.size()) == world) {
    FailAttemptLocked(
        job,
        absl::StrCat(
            "no rank reached the rendezvous", Within(job),
            ": can the workers reach the coordinator, and do they need longer to start a rank?"),
        /*lost_worker=*/"");
    return;
  }
  QuarantineLocked(job, never_reached, absl::StrCat("did not reach the rendezvous", Within(job)),
                   now);
}

void JobController::RestoreQuarantinesLocked() {
  if (options_.quarantine <= absl::ZeroDuration()) return;  // quarantining is off now
  auto quarantines = jobs_->LoadQuarantines();
  LogIfFailed(quarantines.status(), "loading the quarantines from the state file");
  if (!quarantines.ok()) return;
  for (const StoredQuarantine& quarantine : *quarantines) HoldQuarantineLocked(quarantine);
}

void JobController::HoldQuarantineLocked(const StoredQuarantine& quarantine) {
  const absl::Time until = absl::FromUnixMillis(quarantine.until_ms);
  workers_->Quarantine(quarantine.worker, quarantine.reason, until);
  quarantine_ends_.insert(until);  // a scheduling pass when it ends
}

void JobController::QuarantineLocked(const v1::Job& job, const std::vector<int32_t>& ranks,
                                     const std::string& what, absl::Time now) {
  const std::string reason = QuarantineWorkersLocked(job, ranks, what, now);
  if (job.requeues_since_running() < kMaxRequeuesWithoutRestart) {
    return RequeueWithoutRestartLocked(job, reason);
  }
  // Workers keep failing this job's start: its own doing, likelier than that many faulty
  // workers in a row, and the restart policy decides (requeue_bound.h).
  FailAttemptLocked(job,
                    absl::StrCat(reason, "; the job was placed again without a restart ",
                                 job.requeues_since_running(),
                                 " times in a row already, its attempts ending before they ran: "
                                 "does its start take its workers down (memory, threads)?"),
                    /*lost_worker=*/"", /*retryable=*/true);
}

std::string JobController::QuarantineWorkersLocked(const v1::Job& job,
                                                   const std::vector<int32_t>& ranks,
                                                   const std::string& what, absl::Time now) {
  const bool quarantining = options_.quarantine > absl::ZeroDuration();
  std::string reason = absl::StrCat(
      RanksAndWorkers(job, ranks), " ", what,
      quarantining ? absl::StrCat("; quarantined for ", absl::FormatDuration(options_.quarantine))
                   : "");
  for (int32_t rank : ranks) {
    const std::string worker = WorkerOfRank(job, rank);
    if (!quarantining || worker.empty()) continue;
    const StoredQuarantine quarantine{
        worker, absl::ToUnixMillis(now + options_.quarantine),
        absl::StrCat("rank ", rank, " of ", job.id(), " attempt ", job.attempt(), " ", what)};
    HoldQuarantineLocked(quarantine);
    LogIfFailed(jobs_->SaveQuarantine(quarantine), "keeping a quarantine in the state file",
                LogContext().Worker(worker));
  }
  LogWarning(LogContext().Job(job.id()).Attempt(job.attempt()), reason);
  return reason;
}

}  // namespace shardwise
