// Healing degraded fault-tolerant attempts (spec.fault_tolerance.heal, default on): when
// idle workers can hold a replica group that left, the coordinator places the group's
// ranks on them and writes the next epoch with the group live again, then tells the
// joiners (an Assignment with `join`) and the live ranks (a MembershipChange). The live
// ranks move to the epoch after a step at which every one of them holds it (their commit
// vote says so), and the joiners take each shard from a live rank that holds it
// (worker/train/trainer.cc): no checkpoint is read, no step is redone.

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/random_token.h"
#include "contracts/membership.h"
#include "server/job_controller.h"
#include "server/scheduler.h"

namespace shardwise {
namespace {

bool HealEnabled(const v1::JobSpec& spec) {
  return spec.has_fault_tolerance() &&
         (!spec.fault_tolerance().has_heal() || spec.fault_tolerance().heal());
}

}  // namespace

void JobController::HealDegradedAttemptsLocked() {
  std::vector<v1::Job> degraded;
  for (const auto& [job_id, live] : live_) {
    // A rank already done: the live ranks are past their last step, none will move.
    if (live.awaiting_reattach || !live.completed.empty()) continue;
    auto job = jobs_->Get(job_id);
    if (!job.ok() || job->state() != v1::RUNNING || job->attempt() != live.attempt ||
        !HealEnabled(job->spec()) || job->membership().attempt() != job->attempt() ||
        job->membership().left_ranks().empty() ||
        job->progress().step() + 1 >= job->spec().steps()) {
      continue;
    }
    degraded.push_back(*job);
  }
  for (const v1::Job& job : degraded) {
    const std::vector<int32_t> group = GroupToHeal(job.spec(), job.membership());
    std::vector<std::string> workers;
    for (const v1::WorkerInfo& worker : workers_->Idle(job.spec().device())) {
      if (workers.size() == group.size()) break;
      if (MemoryFits(job.memory_per_rank().total_bytes(), RankMemory(worker))) {
        workers.push_back(worker.id());
      }
    }
    if (workers.size() < group.size()) continue;  // not yet: a later pass, when some are idle
    HealLocked(job, group, workers);
  }
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
  const v1::Membership next = Rejoined(job.membership(), group);
  std::vector<std::string> where;
  where.reserve(placed.size());
  for (const v1::RankAssignment& rank : placed) {
    where.push_back(absl::StrCat(rank.rank(), " on ", rank.worker_id()));
  }
  const std::string summary =
      absl::StrCat("a replacement for ranks ", absl::StrJoin(group, ", "), " joins (rank ",
                   absl::StrJoin(where, ", rank "), "), healed from the live ranks' shards; ranks ",
                   absl::StrJoin(next.live_ranks(), ", "), " train from epoch ", next.epoch());
  // Written first, as every membership: a coordinator restarted after this holds it.
  auto recorded = jobs_->RecordMembership(job.id(), next, summary, placed);
  if (!recorded.ok()) {
    LogIfFailed(recorded.status(), "writing a replacement group", JobContext(job));
    return false;
  }
  const v1::CoordinatorMessage change = MembershipChangeMessage(*recorded);
  for (const v1::RankAssignment& rank : recorded->ranks()) {
    const bool joining = std::find(group.begin(), group.end(), rank.rank()) != group.end();
    const bool live =
        std::find(job.membership().live_ranks().begin(), job.membership().live_ranks().end(),
                  rank.rank()) != job.membership().live_ranks().end();
    if (joining) {
      const std::string token = RandomToken();
      rendezvous_->AdmitRank(job.id(), job.attempt(), rank.rank(), token);
      workers_->SetBusy(rank.worker_id(), job.id(), job.attempt(), rank.rank());
      v1::CoordinatorMessage assignment = AssignmentMessage(*recorded, rank.rank(), token);
      *assignment.mutable_assignment()->mutable_join() = change.membership_change();
      workers_->Send(rank.worker_id(), assignment);
    } else if (live) {
      workers_->Send(rank.worker_id(), change);
    }
  }
  auto live = live_.find(job.id());
  if (live != live_.end()) live->second.joining.insert(group.begin(), group.end());
  if (options_.metrics != nullptr) {
    options_.metrics->membership_changes_total.With({"healed"}).Increment();
  }
  stalls_.Forget(job.id());
  stalls_.Track(job.id(), job.attempt(), job.spec().world_size());
  LogInfo(JobContext(job), summary);
  return true;
}

}  // namespace shardwise
