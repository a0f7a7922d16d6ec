// Fault-tolerant attempts (spec.fault_tolerance): a lost rank takes its replica group out
// of the attempt and the other groups train on (contracts/membership.h decides). The
// coordinator writes the new membership first, then tells the live ranks, which cut the
// connections of the epoch before and connect among themselves (worker/train/membership_moves.cc,
// "Recover"): a coordinator restarted in between holds what the ranks will be told.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "contracts/job_ranks.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"
#include "server/job_controller.h"

namespace shardwise {
namespace {

// The ranks of `before` that are not in `after`.
std::vector<int32_t> RanksNotIn(const std::vector<int32_t>& before,
                                const std::vector<int32_t>& after) {
  std::vector<int32_t> left;
  for (int32_t rank : before) {
    if (std::find(after.begin(), after.end(), rank) == after.end()) left.push_back(rank);
  }
  return left;
}

}  // namespace

v1::CoordinatorMessage JobController::MembershipChangeMessage(const v1::Job& job) {
  v1::CoordinatorMessage message;
  v1::MembershipChange* change = message.mutable_membership_change();
  change->set_job_id(job.id());
  change->set_attempt(job.attempt());
  change->set_epoch(job.membership().epoch());
  *change->mutable_live_ranks() = job.membership().live_ranks();
  return message;
}

std::vector<int32_t> JobController::LiveRanksOf(const v1::Job& job) {
  return LiveRanks(job.spec(), job.membership(), job.attempt());
}

int32_t JobController::SpeakerOf(const v1::Job& job, const LiveAttempt& attempt) {
  const std::vector<int32_t> live = LiveRanksOf(job);
  for (int32_t rank : live) {
    if (attempt.joining.count(rank) == 0) return rank;
  }
  return live.front();
}

void JobController::OnRankFailedLocked(const v1::Job& job, LiveAttempt& attempt,
                                       const v1::AttemptReport& report,
                                       const std::string& worker_id) {
  const std::string reason =
      absl::StrCat(RankName(job, report.rank()), " failed: ", report.message());
  const bool retryable = !report.permanent();
  if (!retryable || job.spec().has_fault_tolerance() ||
      options_.failure_report_grace <= absl::ZeroDuration()) {
    return LoseRankLocked(job, report.rank(), reason, worker_id, retryable);
  }
  if (attempt.held_failure.has_value()) return;  // the first one stands for them all
  attempt.held_failure =
      LiveAttempt::HeldFailure{reason, worker_id, clock_.Now() + options_.failure_report_grace};
}

void JobController::CheckHeldFailuresLocked(absl::Time now) {
  std::vector<std::pair<v1::Job, LiveAttempt::HeldFailure>> due;
  for (auto& [job_id, live] : live_) {
    if (!live.held_failure.has_value() || live.held_failure->deadline > now) continue;
    // An input missing on a rank's host decides first (by the join deadline at the
    // latest): it may keep a host out, which a failure of the attempt would not.
    if (!live.inputs_missing.empty()) continue;
    auto job = jobs_->Current(job_id);
    if (job.ok() && job->attempt() == live.attempt) due.emplace_back(*job, *live.held_failure);
    live.held_failure.reset();
  }
  // Failing re-queues the job (and changes live_): after the scan.
  for (const auto& [job, held] : due) FailAttemptLocked(job, held.reason, held.worker);
}

void JobController::LoseRankLocked(const v1::Job& job, int32_t rank, const std::string& reason,
                                   const std::string& lost_worker, bool retryable) {
  if (retryable && LeaveIfTolerantLocked(job, rank, reason, lost_worker, /*graceful=*/false)) {
    return;
  }
  FailAttemptLocked(job, reason, lost_worker, retryable);
}

void JobController::LeaveLocked(const v1::Job& job, int32_t rank, const std::string& reason,
                                const std::string& worker) {
  if (LeaveIfTolerantLocked(job, rank, reason, worker, /*graceful=*/true)) return;
  FailAttemptLocked(job, reason, worker, /*retryable=*/true);
}

bool JobController::LeaveIfTolerantLocked(const v1::Job& job, int32_t lost_rank,
                                          const std::string& reason, const std::string& lost_worker,
                                          bool graceful) {
  auto live = live_.find(job.id());
  // Only an attempt whose ranks all trained: one still joining fails as any does.
  if (!job.spec().has_fault_tolerance() || job.state() != v1::RUNNING || live == live_.end() ||
      live->second.attempt != job.attempt()) {
    return false;
  }
  const std::vector<int32_t> before = LiveRanksOf(job);
  // Gone already (its group left; its end may reach a coordinator restarted since).
  if (std::find(before.begin(), before.end(), lost_rank) == before.end()) return true;
  if (live->second.awaiting_reattach) return false;
  const MembershipDecision decision =
      DecideAfterLoss(job.spec(), job.membership(), job.attempt(), {lost_rank});
  if (!decision.train_on) {
    // The attempt ends for the loss and for min_replicas, and its reason says both.
    FailAttemptLocked(job, absl::StrCat(reason, "; ", decision.summary), lost_worker,
                      /*retryable=*/true);
    return true;
  }
  auto recorded = jobs_->RecordMembership(job.id(), decision.next,
                                          absl::StrCat(reason, "; ", decision.summary));
  if (!recorded.ok()) {
    LogIfFailed(recorded.status(), "writing a membership change", JobContext(job));
    return false;  // unwritten, it must not be acted on: the attempt fails instead
  }
  DropOldEpochKeys(*recorded);
  const std::vector<int32_t> after(decision.next.live_ranks().begin(),
                                   decision.next.live_ranks().end());
  const std::vector<int32_t> left = RanksNotIn(before, after);
  for (int32_t rank : left) live->second.joining.erase(rank);  // a replacement group's
  // A group leaving on purpose still connects the epoch it is in and votes its last step;
  // a lost one's tokens go (a lost rank may be alive behind a partition, a mate may not
  // have heard its abort yet).
  if (!graceful) rendezvous_->RevokeRanks(job.id(), job.attempt(), left);
  v1::CoordinatorMessage stop = AbortMessage(
      job.id(), job.attempt(), absl::StrCat("rank left the attempt with its group: ", reason));
  const v1::CoordinatorMessage change = MembershipChangeMessage(*recorded);
  // A group leaving because the job was scaled below it is no worker's trouble.
  const bool scaled_down =
      graceful && job.target_replicas() > 0 &&
      static_cast<int32_t>(before.size()) / ReplicaGroupSize(job.spec()) > job.target_replicas();
  if (options_.metrics != nullptr) {
    options_.metrics->membership_changes_total
        .With({scaled_down ? "scaled_down"
               : graceful  ? "left"
                           : "lost"})
        .Increment();
  }
  if (!lost_worker.empty() && !scaled_down) CountWorkerLeaveLocked(*recorded, lost_worker);
  for (const v1::RankAssignment& rank : job.ranks()) {
    const bool staying = std::find(after.begin(), after.end(), rank.rank()) != after.end();
    const bool was_live = std::find(before.begin(), before.end(), rank.rank()) != before.end();
    if (staying) {
      workers_->Send(rank.worker_id(), change);
    } else if (was_live && rank.worker_id() != lost_worker && !graceful &&
               RunsAttemptLocked(rank.worker_id(), job)) {
      // A group mate of the lost rank, unless its worker left the attempt already (it came
      // back without it after a coordinator restart, and may run another job by now).
      workers_->Drain(rank.worker_id(), stop);
    }
  }
  // Positions restart with the epoch (the lost ranks' would read as stalls).
  stalls_.Forget(job.id());
  stalls_.Track(job.id(), job.attempt(), after);
  LogWarning(JobContext(job), absl::StrCat(reason, "; ", decision.summary));
  ReconsiderHookSwitchLocked(*recorded, /*joiners=*/{});
  // The live ranks may all have finished already (the loss came at the very end).
  FinishIfCompletedLocked(*recorded);
  RequestScheduleLocked();  // the leaving group's workers may be idle now
  return true;
}

void JobController::DropOldEpochKeys(const v1::Job& job) {
  rendezvous_->DropEpochsBefore(job.id(), job.attempt(), job.membership().epoch() - 1);
}

}  // namespace shardwise
