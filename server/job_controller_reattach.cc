// Adopting, after a coordinator restart, the attempts the previous coordinator ran.
//
// The training step never calls the coordinator, so ranks train on while it is down
// (their workers hold the reports they cannot send). The jobs it was running are still
// RUNNING in the state file. Each worker that registers again names the attempt it runs
// (RegisterWorkerRequest.running); when that is a rank of such a job, on the worker the
// job's ranks name, the worker is BUSY with it again and sends what it held. Once every
// rank is back the attempt simply goes on; a rank that does not come back within
// Options::reattach_grace (or comes back without the attempt: its daemon restarted)
// ends the attempt, and the job is re-queued from its newest checkpoint without using up
// its restart policy, as before re-attaching existed; a fault-tolerant attempt instead
// goes on without the groups of the ranks missing once a rank is known lost and the
// peer timeout has passed (or the grace, if sooner).

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"
#include "server/job_controller.h"

namespace shardwise {
namespace {

// The live ranks of `job` a re-attaching attempt waits for: those that had not completed
// (a completed rank's worker may run another job by now).
std::vector<int32_t> AwaitedRanks(const v1::Job& job, const std::set<int32_t>& completed) {
  std::vector<int32_t> awaited;
  for (int32_t rank : LiveRanks(job.spec(), job.membership(), job.attempt())) {
    if (completed.count(rank) == 0) awaited.push_back(rank);
  }
  return awaited;
}

// The awaited ranks of `job` that have not re-attached.
std::vector<int32_t> MissingRanks(const v1::Job& job, const std::set<int32_t>& completed,
                                  const std::set<int32_t>& reattached) {
  std::vector<int32_t> missing;
  for (int32_t rank : AwaitedRanks(job, completed)) {
    if (reattached.count(rank) == 0) missing.push_back(rank);
  }
  return missing;
}

bool Contains(const std::vector<int32_t>& ranks, int32_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

}  // namespace

void JobController::AwaitReattachments() {
  const absl::Time deadline = clock_.Now() + options_.reattach_grace;
  for (const v1::Job& job : jobs_->Live()) {
    if (job.state() != v1::RUNNING) continue;
    LiveAttempt& live = StartLiveAttemptLocked(job, job.has_execution_order());
    for (const v1::RankAssignment& rank : job.ranks()) live.joined.insert(rank.rank());
    if (job.completion().attempt() == job.attempt()) {  // ranks that completed before
      live.completed.insert(job.completion().ranks().begin(), job.completion().ranks().end());
      // A result without `led`: a state file written before the field was.
      live.led_completed = job.completion().led() || !job.completion().result().empty();
      live.result = job.completion().result();
    }
    const size_t awaited = AwaitedRanks(job, live.completed).size();
    live.awaiting_reattach = awaited > 0;
    live.reattach_deadline = deadline;
    RecordJobEvent(
        job,
        absl::StrCat("the coordinator restarted while attempt ", job.attempt(),
                     " was RUNNING; waiting up to ", absl::FormatDuration(options_.reattach_grace),
                     " for its ", awaited, " ranks to re-attach",
                     live.completed.empty()
                         ? ""
                         : absl::StrCat(" (", live.completed.size(), " had completed)")),
        "recording an event");
    if (awaited == 0) FinishIfCompletedLocked(job);  // its end was not written
  }
}

bool JobController::RepeatsReattachmentLocked(const std::string& worker_id,
                                              const v1::WorkerInfo& before,
                                              const v1::RegisterWorkerRequest& request) const {
  return to_resync_.count(worker_id) > 0 && before.state() == v1::BUSY && request.has_running() &&
         request.running().job_id() == before.job_id() &&
         request.running().attempt() == before.attempt() &&
         request.running().rank() == before.rank();
}

bool JobController::ReattachLocked(const std::string& worker_id, const v1::RunningAttempt& running,
                                   bool repeated) {
  auto live = live_.find(running.job_id());
  // A repeated registration may come once every rank is back and the wait has ended.
  if (live == live_.end() || !(live->second.awaiting_reattach || repeated) ||
      live->second.attempt != running.attempt()) {
    return false;
  }
  auto job = jobs_->Current(running.job_id());
  if (!job.ok() || job->state() != v1::RUNNING || job->attempt() != running.attempt() ||
      WorkerOfRank(*job, running.rank()) != worker_id) {
    return false;
  }
  // A rank whose group left (a membership the previous coordinator wrote) is not awaited:
  // counted, it would stand in for a live rank still to come. It is told to stop.
  LiveAttempt& attempt = live->second;
  const std::vector<int32_t> live_ranks = AwaitedRanks(*job, attempt.completed);
  if (!Contains(live_ranks, running.rank())) return false;
  workers_->SetBusy(worker_id, job->id(), job->attempt(), running.rank());
  // The scope lived in the previous coordinator's memory; a fault-tolerant attempt's
  // ranks connect each new membership epoch through it.
  rendezvous_->AdmitRank(job->id(), job->attempt(), running.rank(), running.rendezvous_token());
  attempt.reattached.insert(running.rank());
  to_resync_.insert(worker_id);
  if (running.peer_lost())
    DecideReattachSoonerLocked(*job, attempt, "a re-attached rank lost a peer");
  LogInfo(
      LogContext().Job(job->id()).Attempt(job->attempt()).Rank(running.rank()).Worker(worker_id),
      absl::StrCat("re-attached at step ", running.step()));
  EndReattachWaitIfAllBackLocked(*job, attempt);
  return true;
}

void JobController::EndReattachWaitIfAllBackLocked(const v1::Job& job, LiveAttempt& attempt) {
  if (!attempt.awaiting_reattach) return;
  // Every rank still awaited is back. A rank that re-attached and has completed since is
  // no longer awaited, but it did come back: counting the re-attached against the
  // awaited would wait on, past the grace, for a rank that is not missing.
  if (!MissingRanks(job, attempt.completed, attempt.reattached).empty()) return;
  attempt.awaiting_reattach = false;
  RecordJobEvent(
      job,
      absl::StrCat(
          "all ", attempt.reattached.size(), " ranks of attempt ", job.attempt(),
          " re-attached after the coordinator restarted; training went on without a restart"),
      "recording an event");
}

void JobController::DecideReattachSoonerLocked(const v1::Job& job, LiveAttempt& attempt,
                                               const std::string& cause) {
  if (!job.spec().has_fault_tolerance() || !attempt.awaiting_reattach) return;
  const absl::Time sooner = clock_.Now() + PeerTimeout(job.spec());
  if (sooner >= attempt.reattach_deadline) return;
  attempt.reattach_deadline = sooner;
  RecordJobEvent(
      job,
      absl::StrCat(cause, ": the ranks still missing are taken out after ",
                   absl::FormatDuration(PeerTimeout(job.spec())),
                   " (fault_tolerance.peer_timeout_seconds), not after the whole re-attach grace"),
      "recording an event");
}

void JobController::OnPeerLostWhileReattaching(const std::string& job_id, int32_t attempt) {
  absl::MutexLock lock(&mu_);
  auto live = live_.find(job_id);
  if (live == live_.end() || live->second.attempt != attempt) return;
  auto job = jobs_->Current(job_id);
  if (job.ok() && job->attempt() == attempt) {
    DecideReattachSoonerLocked(*job, live->second, "a re-attached rank lost a peer");
  }
}

void JobController::OnRankBackWithoutAttemptLocked(const std::string& worker_id) {
  std::vector<v1::Job> lost;
  for (const auto& [job_id, live] : live_) {
    if (!live.awaiting_reattach) continue;
    auto job = jobs_->Current(job_id);
    if (!job.ok()) continue;
    // One that left, or completed, is not awaited.
    const std::vector<int32_t> missing = MissingRanks(*job, live.completed, live.reattached);
    for (const v1::RankAssignment& rank : job->ranks()) {
      if (rank.worker_id() == worker_id && Contains(missing, rank.rank())) lost.push_back(*job);
    }
  }
  const std::string cause = absl::StrCat("worker ", worker_id,
                                         " registered again without the attempt (its daemon "
                                         "restarted) after the coordinator restarted");
  for (const v1::Job& job : lost) {
    auto live = live_.find(job.id());
    if (job.spec().has_fault_tolerance() && live != live_.end()) {
      DecideReattachSoonerLocked(job, live->second, cause);
    } else {
      RequeueWithoutRestartLocked(job, cause);
    }
  }
}

void JobController::ResyncReattachedLocked(const std::string& worker_id) {
  if (to_resync_.erase(worker_id) == 0) return;
  auto worker = workers_->Get(worker_id);
  if (!worker.ok()) return;
  auto job = jobs_->Current(worker->job_id());
  if (!job.ok() || job->attempt() != worker->attempt()) return;
  // A rank may wait at a proposed step for the decision the previous coordinator never
  // sent; decisions already heard are ignored (hook_schedule.h).
  for (const v1::HookSwitch& decided : job->hook_switches()) {
    if (decided.state() == v1::HookSwitch::PROPOSED) continue;
    workers_->Send(worker_id, HookDecisionMessage(*job, decided.version(),
                                                  decided.state() == v1::HookSwitch::APPLIED));
  }
  // A membership the previous coordinator wrote but may not have sent (it was killed in
  // between): a live rank waiting for it goes on; one that has it ignores it.
  const std::vector<int32_t> live_ranks = LiveRanksOf(*job);
  if (job->membership().attempt() == job->attempt() && job->membership().epoch() > 0 &&
      std::find(live_ranks.begin(), live_ranks.end(), worker->rank()) != live_ranks.end()) {
    workers_->Send(worker_id, MembershipChangeMessage(*job));
  }
  // A scale-down's request to leave, which the previous coordinator may have sent before
  // this worker's session (or not at all).
  const std::vector<int32_t> above = RanksAboveTarget(*job);
  if (std::find(above.begin(), above.end(), worker->rank()) != above.end()) {
    workers_->Send(worker_id, LeaveMessage(*job));
  }
  if (job->prefetch_plan().version() > 0) {
    v1::CoordinatorMessage update;
    update.mutable_plan_update()->set_job_id(job->id());
    update.mutable_plan_update()->set_attempt(job->attempt());
    *update.mutable_plan_update()->mutable_plan() = job->prefetch_plan();
    workers_->Send(worker_id, update);
  }
}

void JobController::CheckReattachDeadlinesLocked(absl::Time now) {
  std::vector<std::pair<v1::Job, std::string>> expired;
  for (auto& [job_id, live] : live_) {
    if (!live.awaiting_reattach || now < live.reattach_deadline) continue;
    auto job = jobs_->Current(job_id);
    if (!job.ok()) continue;
    const std::vector<int32_t> missing = MissingRanks(*job, live.completed, live.reattached);
    if (missing.empty()) {  // defensive: each re-attach ends the wait once none is missing
      EndReattachWaitIfAllBackLocked(*job, live);
      continue;
    }
    const size_t awaited = AwaitedRanks(*job, live.completed).size();
    std::vector<std::string> names;
    names.reserve(missing.size());
    for (int32_t rank : missing) names.push_back(RankName(*job, rank));
    expired.emplace_back(
        *job, absl::StrCat(
                  "only ", awaited - missing.size(), " of ", awaited, " ranks re-attached within ",
                  absl::FormatDuration(options_.reattach_grace),
                  " after the coordinator restarted (missing: ", absl::StrJoin(names, ", "), ")"));
  }
  for (const auto& [job, reason] : expired) {
    if (!LeaveWithoutMissingRanksLocked(job, reason)) RequeueWithoutRestartLocked(job, reason);
  }
}

bool JobController::LeaveWithoutMissingRanksLocked(const v1::Job& job, const std::string& reason) {
  if (!job.spec().has_fault_tolerance()) return false;
  auto live = live_.find(job.id());
  if (live == live_.end()) return false;
  const std::vector<int32_t> missing =
      MissingRanks(job, live->second.completed, live->second.reattached);
  // Dry run first: the whole loss must leave enough replicas, or nothing changes.
  if (missing.empty() ||
      !DecideAfterLoss(job.spec(), job.membership(), job.attempt(), missing).train_on) {
    return false;
  }
  live->second.awaiting_reattach = false;  // the re-attached ranks train on without them
  for (int32_t rank : missing) {
    auto current = jobs_->Current(job.id());
    if (!current.ok()) return true;
    const std::vector<int32_t> still = LiveRanksOf(*current);
    if (std::find(still.begin(), still.end(), rank) == still.end()) continue;  // its group left
    if (!LeaveIfTolerantLocked(*current, rank, reason, WorkerOfRank(*current, rank),
                               /*graceful=*/false)) {
      FailAttemptLocked(*current, reason, WorkerOfRank(*current, rank), /*retryable=*/true);
      return true;
    }
  }
  return true;
}

void JobController::RequeueWithoutRestartLocked(const v1::Job& job, const std::string& reason) {
  EndAttemptLocked(job);
  LogIfFailed(jobs_
                  ->Requeue(job.id(), job.attempt(),
                            absl::StrCat("attempt ", job.attempt(), " ended: ", reason,
                                         "; re-queued as a new attempt"),
                            /*counts_as_restart=*/false)
                  .status(),
              "re-queueing", JobContext(job));
  // After the write, as FailAttemptLocked's.
  AbortRanksLocked(job, absl::StrCat("attempt ", job.attempt(), " ended: ", reason),
                   /*skip_worker=*/"");
  RequestScheduleLocked();
}

}  // namespace shardwise
