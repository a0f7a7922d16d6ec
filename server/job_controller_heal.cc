// Healing degraded fault-tolerant attempts (spec.fault_tolerance.heal, default on): when
// idle workers can hold a replica group that left, the coordinator places the group's
// ranks on them and writes the next epoch with the group live again, then tells the
// joiners (an Assignment with `join`) and the live ranks (a MembershipChange). The live
// ranks move to the epoch after a step at which every one of them holds it (their commit
// vote says so), and the joiners take each shard from a live rank that holds it
// (worker/train/membership_moves.cc): no checkpoint is read, no step is redone.
//
// Scaling (`shardwise scale`, Job.target_replicas) goes through the same two paths: down,
// the groups above the target are asked to leave after their step (as a drained
// worker's); up, replacements are placed until the target is met.

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/random_token.h"
#include "common/status_macros.h"
#include "contracts/job_ranks.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"
#include "server/job_controller.h"
#include "server/scheduler.h"

namespace shardwise {
namespace {

bool HealEnabled(const v1::JobSpec& spec) {
  return spec.has_fault_tolerance() &&
         (!spec.fault_tolerance().has_heal() || spec.fault_tolerance().heal());
}

// The replica groups the job keeps: its target_replicas (at most MaxReplicas), or the
// groups it started with.
int32_t TargetGroups(const v1::Job& job) {
  return job.target_replicas() > 0 ? std::min(job.target_replicas(), MaxReplicas(job.spec()))
                                   : InitialReplicas(job.spec());
}

}  // namespace

absl::StatusOr<v1::Job> JobController::Scale(const std::string& job_id, int32_t replicas) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const v1::Job job, jobs_->Current(job_id));
  // Wrong for the job whatever its state (its spec bounds it): said as such first.
  if (!job.spec().has_fault_tolerance() && replicas < 1) {
    return absl::InvalidArgumentError(absl::StrCat("replicas must be at least 1, got ", replicas));
  }
  if (job.spec().has_fault_tolerance()) {
    const int32_t most = MaxReplicas(job.spec());
    const int32_t least = std::max(1, job.spec().fault_tolerance().min_replicas());
    if (replicas < least || replicas > most) {
      return absl::InvalidArgumentError(absl::StrCat(
          "replicas must be ", least, " (fault_tolerance.min_replicas) to ", most,
          job.spec().fault_tolerance().max_replicas() > 0
              ? " (fault_tolerance.max_replicas)"
              : absl::StrCat(" (the groups of world_size ", job.spec().world_size(),
                             "; fault_tolerance.max_replicas lets a job grow past them)"),
          ", got ", replicas));
    }
  }
  if (!job.spec().has_fault_tolerance() || job.state() != v1::RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", v1::JobState_Name(job.state()),
                     job.spec().has_fault_tolerance() ? "" : " and has no fault_tolerance",
                     ": only a running job with fault_tolerance can be scaled"));
  }
  ASSIGN_OR_RETURN(
      v1::Job scaled,
      jobs_->SetTargetReplicas(job_id, replicas,
                               absl::StrCat("scaled to ", replicas, " replica group",
                                            replicas == 1 ? "" : "s", " (shardwise scale)")));
  AskGroupsAboveTargetToLeaveLocked(scaled);
  RequestScheduleLocked();  // below it: replacements, as idle workers allow
  return scaled;
}

std::vector<int32_t> JobController::RanksAboveTarget(const v1::Job& job) {
  const std::vector<int32_t> live = LiveRanksOf(job);
  const int32_t size = ReplicaGroupSize(job.spec());
  const int32_t surplus = static_cast<int32_t>(live.size()) / size - TargetGroups(job);
  if (surplus <= 0) return {};
  // The highest groups leave.
  return {live.end() - static_cast<ptrdiff_t>(surplus) * size, live.end()};
}

v1::CoordinatorMessage JobController::LeaveMessage(const v1::Job& job) {
  v1::CoordinatorMessage message;
  v1::LeaveRequest* leave = message.mutable_leave();
  leave->set_job_id(job.id());
  leave->set_attempt(job.attempt());
  leave->set_reason(absl::StrCat("the job is scaled to ", TargetGroups(job), " replica group",
                                 TargetGroups(job) == 1 ? "" : "s"));
  return message;
}

void JobController::AskGroupsAboveTargetToLeaveLocked(const v1::Job& job) {
  // Each rank of them is asked, and one asking takes its group.
  const v1::CoordinatorMessage message = LeaveMessage(job);
  for (int32_t rank : RanksAboveTarget(job)) workers_->Send(WorkerOfRank(job, rank), message);
}

// A worker's first leave is no sign of trouble (a pod restarts, a node is drained); from its
// second, it waits this long before the attempt takes it again, doubling each time.
constexpr absl::Duration kRejoinBackoff = absl::Minutes(1);

void JobController::CountWorkerLeaveLocked(const v1::Job& job, const std::string& worker) {
  auto live = live_.find(job.id());
  if (live == live_.end() || live->second.attempt != job.attempt()) return;
  LiveAttempt::WorkerLeaves& leaves = live->second.leaves_by_worker[worker];
  ++leaves.times;
  if (leaves.times < 2) return;
  const absl::Duration held = kRejoinBackoff * (int64_t{1} << std::min(leaves.times - 2, 10));
  leaves.held_until = clock_.Now() + held;
  RecordJobEvent(
      job,
      absl::StrCat("worker ", worker, " left attempt ", job.attempt(), " ", leaves.times,
                   " times: it is not placed in it again for ", absl::FormatDuration(held)),
      "recording an event");
}

void JobController::HealDegradedAttemptsLocked() {
  std::vector<v1::Job> degraded;
  for (const auto& [job_id, live] : live_) {
    // A rank already done: the live ranks are past their last step, none will move.
    if (live.awaiting_reattach || !live.completed.empty()) continue;
    auto job = jobs_->Current(job_id);
    // Scaled explicitly, a job is grown to its target even with heal off.
    if (!job.ok() || job->state() != v1::RUNNING || job->attempt() != live.attempt ||
        !(HealEnabled(job->spec()) || job->target_replicas() > 0) ||
        job->progress().step() + 1 >= job->spec().steps() ||
        static_cast<int32_t>(LiveRanksOf(*job).size()) / ReplicaGroupSize(job->spec()) >=
            TargetGroups(*job)) {
      continue;
    }
    degraded.push_back(*job);
  }
  const absl::Time now = clock_.Now();
  for (const v1::Job& job : degraded) {
    const int32_t size = ReplicaGroupSize(job.spec());
    const int32_t wanted = TargetGroups(job) - static_cast<int32_t>(LiveRanksOf(job).size()) / size;
    const auto& leaves = live_.at(job.id()).leaves_by_worker;
    std::vector<std::string> workers;
    PendingJob needs = PendingJobOf(job);
    // Its ranks meet the live ones in collectives: the same data plane.
    const std::optional<int32_t> version = LiveDataPlaneVersion(job);
    if (!version.has_value()) continue;
    const PendingJob any_version = needs;
    needs.data_plane_version = *version;
    std::map<int32_t, int> of_other_versions;  // idle workers that differ only there
    for (const v1::WorkerInfo& worker : workers_->Idle(job.spec().device())) {
      if (static_cast<int32_t>(workers.size()) == wanted * size) break;
      const auto left = leaves.find(worker.id());
      if (left != leaves.end() && left->second.held_until > now) continue;  // flapping
      if (CanTakeRank(needs, WorkerOffer(worker))) {
        workers.push_back(worker.id());
      } else if (CanTakeRank(any_version, WorkerOffer(worker))) {
        ++of_other_versions[worker.data_plane_version()];
      }
    }
    // Groups that left, or those of a job grown past its initial size not placed yet: as
    // many as the idle workers hold, in one epoch (the rest in a later pass).
    const std::vector<int32_t> ranks = GroupsToHeal(job.spec(), job.membership(), job.attempt(),
                                                    static_cast<int32_t>(workers.size()) / size);
    if (ranks.empty()) {
      SayHealWaitsForVersionLocked(job, *version, of_other_versions);
      continue;
    }
    workers.resize(ranks.size());
    if (HealLocked(job, ranks, workers)) live_.at(job.id()).heal_waits_for_version = false;
  }
}

void JobController::SayHealWaitsForVersionLocked(const v1::Job& job, int32_t version,
                                                 const std::map<int32_t, int>& of_other_versions) {
  LiveAttempt& live = live_.at(job.id());
  int most_of_one = 0;  // a group's ranks share a version too
  std::vector<std::string> counts;
  for (const auto& [other, count] : of_other_versions) {
    most_of_one = std::max(most_of_one, count);
    counts.push_back(absl::StrCat(count, " of version ", other));
  }
  // Only a group's worth is worth saying, once until the attempt heals again: the pass
  // runs every second.
  if (most_of_one < ReplicaGroupSize(job.spec()) || live.heal_waits_for_version) return;
  live.heal_waits_for_version = true;
  RecordJobEvent(
      job,
      absl::StrCat("the job is not healed: its live ranks run data-plane version ", version,
                   ", and the idle workers that would take a group (", absl::StrJoin(counts, ", "),
                   ") are of another (releases that differ there never share a collective); it "
                   "heals once workers of version ",
                   version, " are idle"),
      "recording an event");
}

std::optional<int32_t> JobController::LiveDataPlaneVersion(const v1::Job& job) const {
  for (int32_t rank : LiveRanksOf(job)) {
    const auto worker = workers_->Get(WorkerOfRank(job, rank));
    if (worker.ok()) return worker->data_plane_version();
  }
  return std::nullopt;
}

bool JobController::HealLocked(const v1::Job& job, const std::vector<int32_t>& group,
                               const std::vector<std::string>& workers) {
  std::vector<v1::RankAssignment> placed;
  placed.reserve(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    v1::RankAssignment rank;
    rank.set_rank(group[i]);
    rank.set_worker_id(workers[i]);
    placed.push_back(rank);
  }
  const std::vector<int32_t> before = LiveRanksOf(job);
  const v1::Membership next = Rejoined(job.spec(), job.membership(), job.attempt(), group);
  std::vector<std::string> where;
  where.reserve(placed.size());
  for (const v1::RankAssignment& rank : placed) {
    where.push_back(absl::StrCat(rank.rank(), " on ", rank.worker_id()));
  }
  // Ranks that left this attempt come back as a replacement; the others grow the job.
  const auto& left = job.membership().left_ranks();
  const bool replacing = job.membership().attempt() == job.attempt() &&
                         std::all_of(group.begin(), group.end(), [&](int32_t rank) {
                           return std::find(left.begin(), left.end(), rank) != left.end();
                         });
  const std::string summary =
      absl::StrCat(replacing ? "a replacement for ranks " : "ranks ", absl::StrJoin(group, ", "),
                   replacing ? " joins (rank " : " join, growing the job (rank ",
                   absl::StrJoin(where, ", rank "), "), healed from the live ranks' shards; ranks ",
                   absl::StrJoin(next.live_ranks(), ", "), " train from epoch ", next.epoch());
  // A worker taken here may have just completed a rank of another job.
  WriteCompletionsBeforePlacingLocked();
  // Written first, as every membership: a coordinator restarted after this holds it.
  auto recorded = jobs_->RecordMembership(job.id(), next, summary, placed);
  if (!recorded.ok()) {
    LogIfFailed(recorded.status(), "writing a replacement group", JobContext(job));
    return false;
  }
  DropOldEpochKeys(*recorded);
  const v1::CoordinatorMessage change = MembershipChangeMessage(*recorded);
  // A restarted coordinator has heard no step of the attempt yet but the job's last.
  auto live = live_.find(job.id());
  const absl::Duration longest_step =
      std::max(live != live_.end() ? live->second.longest_step : absl::ZeroDuration(),
               absl::Seconds(recorded->progress().step_seconds()));
  for (const v1::RankAssignment& rank : recorded->ranks()) {
    const bool joining = std::find(group.begin(), group.end(), rank.rank()) != group.end();
    const bool live = std::find(before.begin(), before.end(), rank.rank()) != before.end();
    if (joining) {
      const std::string token = RandomToken();
      rendezvous_->AdmitRank(job.id(), job.attempt(), rank.rank(), token);
      workers_->SetBusy(rank.worker_id(), job.id(), job.attempt(), rank.rank());
      v1::CoordinatorMessage assignment = AssignmentMessage(*recorded, rank.rank(), token);
      *assignment.mutable_assignment()->mutable_join() = change.membership_change();
      assignment.mutable_assignment()->set_join_wait_ms(
          absl::ToInt64Milliseconds(JoinerWait(options_.collective_timeout, longest_step)));
      workers_->Send(rank.worker_id(), assignment);
    } else if (live) {
      workers_->Send(rank.worker_id(), change);
    }
  }
  if (live != live_.end()) live->second.joining.insert(group.begin(), group.end());
  if (options_.metrics != nullptr) {
    options_.metrics->membership_changes_total.With({replacing ? "healed" : "grown"}).Increment();
  }
  stalls_.Forget(job.id());
  stalls_.Track(job.id(), job.attempt(), LiveRanksOf(*recorded));
  LogInfo(JobContext(job), summary);
  ReconsiderHookSwitchLocked(*recorded, workers);
  return true;
}

void JobController::RecordEpochStartedLocked(const v1::Job& job, LiveAttempt& attempt,
                                             const v1::AttemptReport& report) {
  if (report.rank() != LiveRanksOf(job).front()) return;  // the epoch's leader speaks for it
  // An epoch of this attempt's memberships, said once: the set stays within the epochs.
  if (report.epoch() < 0 || report.epoch() > job.membership().epoch() ||
      !attempt.epochs_started.insert(report.epoch()).second) {
    return;
  }
  auto recorded =
      jobs_->RecordEpochStart(job.id(), report.attempt(), report.epoch(), report.step());
  if (!absl::IsAlreadyExists(recorded.status())) {
    LogIfFailed(recorded.status(), "recording an epoch's first step", JobContext(job));
  }
}

void JobController::RecordStateReceivedLocked(const v1::Job& job, LiveAttempt& attempt,
                                              const v1::AttemptReport& report) {
  const v1::StateTransfer& transfer = report.transfer();
  if (transfer.epoch() < 0 || transfer.epoch() > job.membership().epoch() ||
      !attempt.transfers_recorded.emplace(report.rank(), transfer.epoch()).second) {
    return;
  }
  const double seconds = transfer.micros() / 1e6;
  const std::string event =
      absl::StrCat(RankName(job, report.rank()), " took shard ", transfer.shard(), " of step ",
                   transfer.step(), " from ", RankName(job, transfer.donor_rank()), " in epoch ",
                   transfer.epoch(), ": ", transfer.bytes(), " bytes in ",
                   absl::StrFormat("%.1f ms (%.1f MB/s)", seconds * 1e3,
                                   seconds > 0 ? transfer.bytes() / seconds / 1e6 : 0.0),
                   ", checksum ", transfer.checksum());
  RecordJobEvent(job, event, "recording a state transfer");
}

}  // namespace shardwise
