#include "server/job_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/comm_hook.h"
#include "common/prefetch_plan.h"
#include "common/job_spec_defaults.h"
#include "common/status_macros.h"
#include "server/scheduler.h"

namespace shardwise {

std::string JobController::RankName(const v1::Job& job, int32_t rank) {
  for (const auto& r : job.ranks()) {
    if (r.rank() == rank) return absl::StrCat("rank ", rank, " (worker ", r.worker_id(), ")");
  }
  return absl::StrCat("rank ", rank);
}

void JobController::LogError(const absl::Status& status, const char* what) {
  if (!status.ok()) std::fprintf(stderr, "coordinator: %s: %s\n", what, status.ToString().c_str());
}

JobController::JobController(JobManager* jobs, WorkerRegistry* workers,
                             RendezvousStore* rendezvous, const Options& options)
    : jobs_(jobs), workers_(workers), rendezvous_(rendezvous), options_(options) {
  absl::MutexLock lock(&mu_);
  AwaitReattachments();
}

absl::StatusOr<v1::Job> JobController::Submit(const v1::JobSpec& spec) {
  RETURN_IF_ERROR(ValidateJobSpec(spec, options_.limits,
                                  options_.check_paths ? PathChecker(CheckReadableFile) : nullptr));
  v1::JobSpec effective = spec;
  ApplyJobSpecDefaults(&effective);
  ASSIGN_OR_RETURN(const MemoryEstimate memory, EstimateRankMemory(effective));
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckSomeWorkerHasMemory(effective.device(), memory));
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Submit(effective, memory.ToProto()));
  ScheduleLocked();
  return jobs_->Get(job.id());
}

absl::Status JobController::CheckSomeWorkerHasMemory(v1::DeviceKind device,
                                                     const MemoryEstimate& memory) const {
  const std::vector<v1::WorkerInfo> workers = workers_->List();
  const v1::WorkerInfo* largest = nullptr;
  for (const v1::WorkerInfo& worker : workers) {
    if (worker.device() != device) continue;
    if (MemoryFits(memory.total(), RankMemory(worker))) return absl::OkStatus();
    if (largest == nullptr || RankMemory(worker) > RankMemory(*largest)) largest = &worker;
  }
  if (largest == nullptr) return absl::OkStatus();  // none registered yet: the job waits
  return absl::FailedPreconditionError(absl::StrCat(
      "the job needs about ", memory.ToString(), " per rank, but the largest ",
      v1::DeviceKind_Name(device), " worker (", largest->name(), ") advertises ",
      FormatBytes(RankMemory(*largest)),
      "; use more ranks with a sharded strategy, a smaller global_batch_size or more "
      "gradient_accumulation_steps, or activation_checkpointing"));
}

absl::StatusOr<v1::Job> JobController::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Get(job_id));
  if (IsTerminal(job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already ended as ", v1::JobState_Name(job.state()), "; nothing to cancel"));
  }
  const std::string reason = "cancelled by request";
  if (job.state() != v1::PENDING) {
    AbortRanksLocked(job, reason, /*skip_worker=*/"");
    EndAttemptLocked(job);
  }
  ASSIGN_OR_RETURN(v1::Job cancelled,
                   jobs_->Finish(job_id, JobManager::kAnyAttempt, v1::CANCELLED, reason));
  ScheduleLocked();
  return cancelled;
}

// At most this many proposals per set-hook request: each retry starts after the newest
// step a rank reported, so a second one fails only if the job keeps outrunning its
// progress reports.
constexpr int kMaxHookProposals = 3;

absl::StatusOr<v1::HookSwitch> JobController::SetCommHook(const std::string& job_id,
                                                          const v1::CommHook& hook) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Get(job_id));
  auto live = live_.find(job_id);
  if (job.state() != v1::RUNNING || live == live_.end() ||
      live->second.attempt != job.attempt()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is ", v1::JobState_Name(job.state()),
        "; its communication hook can change only while it is RUNNING"));
  }
  if (live->second.awaiting_reattach) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, "'s ranks are re-attaching after a coordinator restart; try again "
        "once they are back (describe shows it)"));
  }
  RETURN_IF_ERROR(ValidateCommHook(hook, job.spec()));
  const v1::CommHook current = HookInEffect(job);
  if (SameHook(current, hook)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already uses ", CommHookName(hook)));
  }
  LiveAttempt& attempt = live->second;
  if (attempt.proposal.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " is still agreeing switch ", attempt.proposal->version(), " to ",
        CommHookName(attempt.proposal->new_hook()), " at step ", attempt.proposal->step()));
  }
  attempt.proposals_tried = 0;
  return ProposeHookSwitchLocked(job, attempt, hook, /*not_before=*/0,
                                 static_cast<int64_t>(absl::ToUnixMillis(absl::Now())));
}

absl::StatusOr<v1::HookSwitch> JobController::ProposeHookSwitchLocked(
    const v1::Job& job, LiveAttempt& attempt, const v1::CommHook& hook, int64_t not_before,
    int64_t request_time_ms) {
  const v1::Progress& progress = job.progress();
  const int64_t lead = std::max<int64_t>(
      options_.hook_switch_min_lead_steps,
      static_cast<int64_t>(std::ceil(progress.steps_per_second() *
                                     absl::ToDoubleSeconds(options_.hook_switch_lead))));
  const int64_t step = std::max(progress.step(), not_before) + lead;
  if (step >= job.spec().steps()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job.id(), " is at step ", progress.step(), " of ", job.spec().steps(),
        "; a switch needs step ", step, " (", lead,
        " steps ahead, for every rank to agree before reaching it), which it will not run"));
  }
  v1::HookSwitch proposal;
  proposal.set_version(job.hook_switches_size() + 1);
  *proposal.mutable_old_hook() = HookInEffect(job);
  *proposal.mutable_new_hook() = hook;
  proposal.set_step(step);
  proposal.set_state(v1::HookSwitch::PROPOSED);
  proposal.set_request_time_ms(request_time_ms);
  ASSIGN_OR_RETURN(v1::Job updated,
                   jobs_->RecordHookSwitch(
                       job.id(), proposal,
                       absl::StrCat("comm hook switch ", proposal.version(), " proposed: ",
                                    CommHookName(proposal.old_hook()), " -> ",
                                    CommHookName(hook), " at step ", step)));
  attempt.proposal = proposal;
  attempt.accepted.clear();
  ++attempt.proposals_tried;
  v1::CoordinatorMessage message;
  v1::HookChange* change = message.mutable_hook_change();
  change->set_job_id(job.id());
  change->set_attempt(job.attempt());
  change->set_version(proposal.version());
  *change->mutable_hook() = hook;
  change->set_step(step);
  SendToRanksLocked(updated, message);
  return proposal;
}

void JobController::OnHookAck(const std::string& worker_id, const v1::HookChangeAck& ack) {
  absl::MutexLock lock(&mu_);
  auto job = jobs_->Get(ack.job_id());
  auto live = live_.find(ack.job_id());
  if (!job.ok() || live == live_.end() || live->second.attempt != ack.attempt() ||
      !live->second.proposal.has_value() ||
      live->second.proposal->version() != ack.version()) {
    return;  // for a proposal already decided, or an attempt that ended
  }
  int32_t rank = -1;
  for (const v1::RankAssignment& r : job->ranks()) {
    if (r.worker_id() == worker_id) rank = r.rank();
  }
  if (rank < 0) return;
  LiveAttempt& attempt = live->second;
  if (!ack.accepted()) {
    const v1::HookSwitch rejected = *attempt.proposal;
    DecideHookSwitchLocked(
        *job, attempt, /*commit=*/false,
        absl::StrCat(RankName(*job, rank), " had already started step ", ack.started_step()));
    if (attempt.proposals_tried < kMaxHookProposals) {
      auto again = jobs_->Get(ack.job_id());
      if (again.ok()) {
        LogError(ProposeHookSwitchLocked(*again, attempt, rejected.new_hook(),
                                         ack.started_step() + 1, rejected.request_time_ms())
                     .status(),
                 "re-proposing a hook switch");
      }
    }
    return;
  }
  attempt.accepted.insert(rank);
  if (static_cast<int32_t>(attempt.accepted.size()) == job->spec().world_size()) {
    DecideHookSwitchLocked(*job, attempt, /*commit=*/true, "");
  }
}

// The decision is written before any rank hears it: a coordinator that crashes between
// the two abandons the switch when it restarts (JobManager), which is right only if no
// rank was told to commit. A commit the state file refuses becomes an abandon.
void JobController::DecideHookSwitchLocked(const v1::Job& job, LiveAttempt& attempt, bool commit,
                                           const std::string& reason) {
  v1::HookSwitch decided = *attempt.proposal;
  attempt.proposal.reset();
  attempt.accepted.clear();
  std::string why = reason;
  if (commit) {
    decided.set_state(v1::HookSwitch::APPLIED);
    const std::string event =
        absl::StrCat("comm hook switched ", CommHookName(decided.old_hook()), " -> ",
                     CommHookName(decided.new_hook()), " at step ", decided.step(), " (switch ",
                     decided.version(), ", agreed by every rank)");
    const absl::Status written = jobs_->RecordHookSwitch(job.id(), decided, event,
                                                         /*durable=*/true).status();
    if (!written.ok()) {
      commit = false;
      why = absl::StrCat("the decision could not be written: ", written.message());
    }
  }
  if (!commit) {
    decided.set_state(v1::HookSwitch::ABANDONED);
    decided.set_reason(why);
    LogError(jobs_->RecordHookSwitch(job.id(), decided,
                                     absl::StrCat("comm hook switch ", decided.version(), " to ",
                                                  CommHookName(decided.new_hook()),
                                                  " abandoned: ", why))
                 .status(),
             "recording a hook switch");
  }
  SendToRanksLocked(job, HookDecisionMessage(job, decided.version(), commit));
}

v1::CoordinatorMessage JobController::HookDecisionMessage(const v1::Job& job, int32_t version,
                                                         bool commit) {
  v1::CoordinatorMessage message;
  v1::HookDecision* decision = message.mutable_hook_decision();
  decision->set_job_id(job.id());
  decision->set_attempt(job.attempt());
  decision->set_version(version);
  decision->set_commit(commit);
  return message;
}

void JobController::SendToRanksLocked(const v1::Job& job, const v1::CoordinatorMessage& message) {
  for (const v1::RankAssignment& rank : job.ranks()) workers_->Send(rank.worker_id(), message);
}

v1::RegisterWorkerResponse JobController::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  v1::RegisterWorkerRequest named = request;
  if (named.name().empty()) named.set_name("worker");
  WorkerRegistry::Registration registration = workers_->Register(named);
  // A daemon that registers again while we think it runs an attempt has restarted: the
  // attempt lost that rank.
  const v1::WorkerInfo& before = registration.previous;
  if ((before.state() == v1::BUSY || before.state() == v1::DRAINING) && !before.job_id().empty()) {
    auto job = jobs_->Get(before.job_id());
    if (job.ok() && job->attempt() == before.attempt() && !IsTerminal(job->state()) &&
        job->state() != v1::PENDING) {
      FailAttemptLocked(*job,
                        absl::StrCat(RankName(*job, before.rank()),
                                     " was lost: the worker restarted and registered again"),
                        registration.worker_id);
    }
  }
  // After a restart: the worker may run a rank of an attempt waiting for its ranks.
  const bool reattached =
      request.has_running() && ReattachLocked(registration.worker_id, request.running());
  if (!reattached) RequeueIfRankCameBackWithoutItLocked(registration.worker_id);
  v1::RegisterWorkerResponse response;
  response.set_reattached(reattached);
  response.set_worker_id(registration.worker_id);
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  return response;
}

absl::StatusOr<std::shared_ptr<SessionOutbox>> JobController::OpenSession(
    const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<SessionOutbox> outbox, workers_->AttachSession(worker_id));
  ResyncReattachedLocked(worker_id);
  ScheduleLocked();
  return outbox;
}

void JobController::CloseSession(const std::string& worker_id,
                                 const std::shared_ptr<SessionOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  if (workers_->DetachSession(worker_id, outbox)) {
    LoseWorkerLocked(worker_id, "its session closed");
  }
}

void JobController::OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  auto worker = workers_->Heartbeat(worker_id);
  if (!worker.ok()) return;
  const bool assigned = worker->state() == v1::BUSY || worker->state() == v1::DRAINING;
  const bool same_attempt = assigned && heartbeat.job_id() == worker->job_id() &&
                            heartbeat.attempt() == worker->attempt();
  if (!heartbeat.job_id().empty() && !same_attempt) {
    // A leftover from an attempt that ended (or from before a coordinator restart).
    v1::CoordinatorMessage abort;
    abort.mutable_abort()->set_job_id(heartbeat.job_id());
    abort.mutable_abort()->set_attempt(heartbeat.attempt());
    abort.mutable_abort()->set_reason("the coordinator is not running this attempt");
    workers_->Send(worker_id, abort);
    return;
  }
  if (same_attempt && heartbeat.has_position()) {
    auto live = live_.find(heartbeat.job_id());
    if (live != live_.end() && live->second.attempt == heartbeat.attempt()) {
      const v1::RankPosition& now_at = heartbeat.position();
      auto [it, inserted] = live->second.positions.try_emplace(worker->rank());
      LiveAttempt::Seen& seen = it->second;
      const bool moved = inserted || seen.position.collectives() != now_at.collectives() ||
                         seen.position.step() != now_at.step() ||
                         seen.position.phase() != now_at.phase() ||
                         seen.position.unit() != now_at.unit();
      seen.position = now_at;
      seen.received = absl::Now();
      if (moved) seen.moved = seen.received;
    }
  }
  if (heartbeat.job_id().empty() && worker->state() == v1::DRAINING) {
    workers_->SetIdle(worker_id);
    ScheduleLocked();
  }
}

void JobController::OnReport(const std::string& worker_id, const v1::AttemptReport& report) {
  absl::MutexLock lock(&mu_);
  auto job = jobs_->Get(report.job_id());
  auto live = live_.find(report.job_id());
  if (!job.ok() || live == live_.end() || live->second.attempt != report.attempt() ||
      job->attempt() != report.attempt()) {
    return;  // a late report of an attempt that already ended
  }
  // Only the worker that holds a rank may speak for it.
  bool holds_rank = false;
  for (const v1::RankAssignment& rank : job->ranks()) {
    holds_rank |= rank.rank() == report.rank() && rank.worker_id() == worker_id;
  }
  if (!holds_rank) {
    std::fprintf(stderr, "coordinator: ignoring a report from %s for rank %d of %s, which it "
                 "does not hold\n", worker_id.c_str(), report.rank(), report.job_id().c_str());
    return;
  }
  LiveAttempt& attempt = live->second;
  if (report.spans_size() > 0 || report.spans_dropped() > 0) {
    timelines_.Add(report.job_id(), report.attempt(), report.rank(), worker_id,
                   {report.spans().begin(), report.spans().end()}, report.spans_dropped());
  }
  switch (report.phase()) {
    case v1::JOINED:
      attempt.joined.insert(report.rank());
      if (static_cast<int32_t>(attempt.joined.size()) == job->spec().world_size() &&
          job->state() == v1::SCHEDULED) {
        LogError(jobs_->MarkRunning(job->id(), report.attempt()).status(), "marking running");
      }
      break;
    case v1::PROGRESS:
      if (report.rank() == 0) {
        LogError(jobs_->UpdateProgress(job->id(), report.attempt(), report.progress()),
                 "recording progress");
      }
      break;
    case v1::COMPLETED:
      attempt.completed.insert(report.rank());
      workers_->SetIdle(worker_id);
      if (report.rank() == 0) {
        attempt.result = report.message();
        LogError(jobs_->UpdateProgress(job->id(), report.attempt(), report.progress()),
                 "recording progress");
      }
      if (static_cast<int32_t>(attempt.completed.size()) == job->spec().world_size()) {
        const std::string result = attempt.result;
        EndAttemptLocked(*job);
        LogError(jobs_->Finish(job->id(), report.attempt(), v1::SUCCEEDED,
                               absl::StrCat("attempt ", report.attempt(), ": every rank completed"),
                               result)
                     .status(),
                 "finishing job");
        ScheduleLocked();
      }
      break;
    case v1::ORDER_RECORDED:
    case v1::ORDER_CHANGED:
      OnExecutionOrderLocked(*job, attempt, report);
      break;
    case v1::ABORTED:
      workers_->SetIdle(worker_id);
      FailAttemptLocked(*job,
                        absl::StrCat(RankName(*job, report.rank()), " failed: ", report.message()),
                        worker_id, /*retryable=*/!report.permanent());
      break;
    default:
      break;
  }
}

namespace {

int NumUnits(const v1::ExecutionOrder& order) {
  int n = 0;
  for (int unit : order.pre_forward()) n = std::max(n, unit + 1);
  for (int unit : order.post_forward()) n = std::max(n, unit + 1);
  return n;
}

}  // namespace

// docs/semantics.md, "Validation": every rank must run its units in the same order, or the
// ranks' collectives pair up wrongly (a hang, or tensors silently mixed). PyTorch checks
// this only in its most verbose debug mode; here the coordinator compares the ranks'
// first iterations and fails the job at once, naming the ranks and the first difference.
void JobController::OnExecutionOrderLocked(const v1::Job& job, LiveAttempt& attempt,
                                           const v1::AttemptReport& report) {
  if (report.phase() == v1::ORDER_CHANGED) {
    // Ranks report independently: a fast rank's change can arrive before a slow rank's
    // first order. Compare it only once the reference order is recorded.
    if (!attempt.order_recorded) {
      if (!attempt.early_change.has_value()) attempt.early_change = report;
      return;
    }
    if (attempt.order_change_warned) return;
    attempt.order_change_warned = true;
    auto plan = PlanPrefetch(report.execution_order(), job.spec().fsdp(),
                             NumUnits(report.execution_order()));
    const std::string change = absl::StrCat(
        "warning: ", RankName(job, report.rank()), "'s execution order changed at step ",
        report.step(), ": ", FirstDifference(job.execution_order(), report.execution_order()),
        " (warned once per attempt)");
    // Re-planned from the new order; if it cannot be planned, the old plan stays.
    v1::PrefetchPlan stored = job.prefetch_plan();
    std::string event = absl::StrCat(change, "; ", plan.status().message());
    if (plan.ok()) {
      stored = *plan;
      stored.set_version(job.prefetch_plan().version() + 1);
      event = absl::StrCat(change, "; re-planned: prefetch plan ", FormatPrefetchPlan(stored));
    }
    auto recorded = jobs_->RecordExecutionPlan(job.id(), job.attempt(), job.execution_order(),
                                               stored, event);
    LogError(recorded.status(), "recording an order change");
    if (recorded.ok() && plan.ok()) {
      // Every rank adopts the new version at the same step (PlanUpdate explains how).
      v1::CoordinatorMessage message;
      v1::PlanUpdate* update = message.mutable_plan_update();
      update->set_job_id(job.id());
      update->set_attempt(job.attempt());
      *update->mutable_plan() = stored;
      SendToRanksLocked(*recorded, message);
    }
    return;
  }
  attempt.orders[report.rank()] = report.execution_order();
  if (static_cast<int32_t>(attempt.orders.size()) < job.spec().world_size()) return;
  const auto& [first_rank, reference] = *attempt.orders.begin();
  std::vector<std::string> differences;
  for (const auto& [rank, order] : attempt.orders) {
    const std::string difference = FirstDifference(reference, order);
    if (!difference.empty()) {
      differences.push_back(absl::StrCat("rank ", rank, " differs from rank ", first_rank,
                                         " at ", difference));
    }
  }
  if (!differences.empty()) {
    const std::string reason = absl::StrCat(
        "the ranks ran their FSDP units in different orders in their first iteration: ",
        absl::StrJoin(differences, "; "),
        "; their collectives would pair up wrongly (a hang, or mixed tensors)");
    AbortRanksLocked(job, reason, /*skip_worker=*/"");
    EndAttemptLocked(job);
    // Not re-queued: the same model runs in the same orders again.
    LogError(jobs_->Finish(job.id(), job.attempt(), v1::FAILED, reason).status(), "failing job");
    ScheduleLocked();
    return;
  }
  auto plan = PlanPrefetch(reference, job.spec().fsdp(), NumUnits(reference));
  if (!plan.ok()) {
    LogError(plan.status(), "planning prefetch");
    return;
  }
  plan->set_version(1);
  auto recorded = jobs_->RecordExecutionPlan(
      job.id(), job.attempt(), reference, *plan,
      absl::StrCat("execution order recorded, the same on all ", job.spec().world_size(),
                   " ranks: ", FormatExecutionOrder(reference), "; prefetch plan ",
                   FormatPrefetchPlan(*plan)));
  LogError(recorded.status(), "recording the execution order");
  if (!recorded.ok()) return;
  attempt.order_recorded = true;
  if (attempt.early_change.has_value()) {
    const v1::AttemptReport change = *attempt.early_change;
    attempt.early_change.reset();
    OnExecutionOrderLocked(*recorded, attempt, change);
  }
}

absl::StatusOr<v1::Timeline> JobController::GetTimeline(const std::string& job_id) const {
  RETURN_IF_ERROR(jobs_->Get(job_id).status());
  return timelines_.Get(job_id);
}

void JobController::CheckHeartbeats() {
  absl::MutexLock lock(&mu_);
  for (const std::string& worker_id :
       workers_->Silent(absl::Now(), options_.heartbeat_timeout)) {
    LoseWorkerLocked(worker_id, absl::StrCat("no heartbeat for more than ",
                                             absl::FormatDuration(options_.heartbeat_timeout)));
  }
  CheckStallsLocked(absl::Now());
  CheckReattachDeadlinesLocked(absl::Now());
}

namespace {

// "0-2", "0, 2, 5".
std::string RankList(const std::vector<int32_t>& ranks) {
  if (ranks.size() > 2 && ranks.back() - ranks.front() + 1 == static_cast<int32_t>(ranks.size())) {
    return absl::StrCat(ranks.front(), "-", ranks.back());
  }
  return absl::StrJoin(ranks, ", ");
}

std::string Where(const v1::RankPosition& p) {
  std::string where = p.collective();
  if (p.unit() >= 0) absl::StrAppend(&where, " of unit ", p.unit());
  absl::StrAppend(&where, " at step ", p.step(), " (", p.phase(), ")");
  return where;
}

}  // namespace

// Every rank runs the same sequence of collectives on each of its threads (lanes), so a
// rank's count of collectives entered on a lane says which one it is in. Ranks that have
// been inside collective N of a lane for longer than the warning time wait for the ranks
// whose count on that lane is below N (they have not entered it) or whose heartbeats
// stopped (a frozen process).
void JobController::CheckStallsLocked(absl::Time now) {
  // Workers from before lanes report only their total.
  auto lane_count = [](const v1::RankPosition& p, int lane) {
    return lane < p.lane_collectives_size() ? p.lane_collectives(lane) : p.collectives();
  };
  for (auto& [job_id, attempt] : live_) {
    auto job = jobs_->Get(job_id);
    if (!job.ok() || job->state() != v1::RUNNING || job->attempt() != attempt.attempt) continue;
    // The waiters: ranks inside a collective for longer than the warning time. A rank
    // whose heartbeats stopped is a suspect, not a waiter: its last position may be
    // inside a collective it will never leave.
    std::vector<std::pair<int32_t, absl::Duration>> waiters;
    int lane = -1;  // the lane of the longest wait: the one examined
    absl::Duration longest = absl::ZeroDuration();
    for (const auto& [rank, seen] : attempt.positions) {
      const v1::RankPosition& position = seen.position;
      if (position.collective().empty() ||
          now - seen.received > 3 * options_.heartbeat_interval) {
        continue;
      }
      const absl::Duration in_collective =
          absl::Milliseconds(position.collective_ms()) + (now - seen.received);
      if (in_collective < options_.stall_warning) continue;
      waiters.push_back({rank, in_collective});
      if (in_collective > longest) {
        longest = in_collective;
        lane = position.lane();
      }
    }
    const v1::RankPosition* waiting_at = nullptr;
    absl::Duration waited = absl::ZeroDuration();
    std::vector<int32_t> waiting;
    for (const auto& [rank, in_collective] : waiters) {
      const v1::RankPosition& position = attempt.positions.at(rank).position;
      if (position.lane() != lane) continue;
      if (waiting_at == nullptr || lane_count(position, lane) > lane_count(*waiting_at, lane)) {
        waiting_at = &position;
        waiting.clear();
      }
      if (lane_count(position, lane) == lane_count(*waiting_at, lane)) {
        waiting.push_back(rank);
        waited = std::max(waited, in_collective);
      }
    }
    if (waiting_at == nullptr) continue;
    std::vector<std::string> missing;
    for (int32_t rank = 0; rank < job->spec().world_size(); ++rank) {
      auto it = attempt.positions.find(rank);
      if (it == attempt.positions.end()) {
        missing.push_back(absl::StrCat("rank ", rank, " has not reported its position"));
        continue;
      }
      const v1::RankPosition& position = it->second.position;
      const absl::Duration silent = now - it->second.received;
      // Behind the waiters and not moving (a rank merely slower gets there soon).
      if (lane_count(position, lane) < lane_count(*waiting_at, lane) &&
          now - it->second.moved >= options_.stall_warning) {
        missing.push_back(absl::StrCat("rank ", rank, " has not entered ", Where(*waiting_at),
                                       "; it is in ", position.phase(),
                                       position.unit() >= 0 ? absl::StrCat(" of unit ", position.unit()) : "",
                                       " at step ", position.step()));
      } else if (silent > 3 * options_.heartbeat_interval) {
        missing.push_back(absl::StrCat("rank ", rank, " has sent no heartbeat for ",
                                       absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100)))));
      }
    }
    if (missing.empty()) continue;  // every rank is inside: a slow collective, not a stall
    const std::string message = absl::StrCat(
        "stall: ", absl::StrJoin(missing, "; "), "; rank", waiting.size() > 1 ? "s " : " ",
        RankList(waiting), waiting.size() > 1 ? " are" : " is", " waiting in ",
        Where(*waiting_at), " for ", absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))));
    if (options_.stall_abort > absl::ZeroDuration() && waited >= options_.stall_abort) {
      FailAttemptLocked(*job,
                        absl::StrCat(message, " (longer than the stall timeout of ",
                                     absl::FormatDuration(options_.stall_abort), ")"),
                        /*lost_worker=*/"");
      return;  // live_ changed
    }
    if (attempt.stall_reported_at == waiting_at->collectives()) continue;
    attempt.stall_reported_at = waiting_at->collectives();  // the waiter's total: unique
    std::fprintf(stderr, "coordinator: %s: %s\n", job_id.c_str(), message.c_str());
    LogError(jobs_->RecordEvent(job_id, job->attempt(), message).status(), "recording a stall");
  }
}

void JobController::Schedule() {
  absl::MutexLock lock(&mu_);
  ScheduleLocked();
}

void JobController::ScheduleLocked() {
  std::vector<PendingJob> pending;
  for (const v1::Job& job : jobs_->Pending()) {
    pending.push_back({job.id(), job.spec().world_size(), job.spec().device(),
                       job.memory_per_rank().total_bytes()});
  }
  if (pending.empty()) return;
  std::vector<IdleWorker> idle;
  for (v1::DeviceKind device : {v1::CPU, v1::CUDA}) {
    for (const v1::WorkerInfo& worker : workers_->Idle(device)) {
      idle.push_back({worker.id(), worker.device(), RankMemory(worker)});
    }
  }
  const std::vector<Placement> placements = PlanGangPlacements(pending, idle);
  // Jobs left waiting say what for, counting the workers of their kind that exist.
  const std::vector<v1::WorkerInfo> workers = workers_->List();
  for (const PendingJob& job : pending) {
    const bool placed = std::any_of(placements.begin(), placements.end(),
                                    [&](const Placement& p) { return p.job_id == job.job_id; });
    if (placed) continue;
    WorkerSupply supply{0, 0, job.memory_per_rank};
    for (const v1::WorkerInfo& worker : workers) {
      if (worker.state() == v1::LOST || worker.device() != job.device) continue;
      ++supply.registered;
      if (MemoryFits(job.memory_per_rank, RankMemory(worker))) ++supply.with_enough_memory;
    }
    LogError(jobs_->SetPendingReason(job.job_id,
                                     PendingReason(job.world_size, job.device, supply)),
             "updating a pending reason");
  }
  for (const Placement& placement : placements) {
    std::vector<v1::RankAssignment> ranks;
    for (size_t r = 0; r < placement.worker_ids.size(); ++r) {
      v1::RankAssignment assignment;
      assignment.set_rank(static_cast<int32_t>(r));
      assignment.set_worker_id(placement.worker_ids[r]);
      ranks.push_back(assignment);
    }
    auto job = jobs_->Schedule(placement.job_id, ranks);
    if (!job.ok()) {
      LogError(job.status(), "scheduling");
      continue;
    }
    rendezvous_->OpenScope(job->id(), job->attempt());
    LiveAttempt& live = live_[job->id()];
    live = LiveAttempt{};
    live.attempt = job->attempt();
    for (const v1::RankAssignment& rank : job->ranks()) {
      workers_->SetBusy(rank.worker_id(), job->id(), job->attempt(), rank.rank());
      v1::CoordinatorMessage message;
      v1::Assignment* assignment = message.mutable_assignment();
      assignment->set_job_id(job->id());
      assignment->set_attempt(job->attempt());
      assignment->set_rank(rank.rank());
      assignment->set_world_size(job->spec().world_size());
      *assignment->mutable_spec() = job->spec();
      *assignment->mutable_hook_switches() = job->hook_switches();
      assignment->set_collective_timeout_ms(
          absl::ToInt64Milliseconds(options_.collective_timeout));
      // A worker whose session closed in between is lost through CloseSession, which
      // then fails this attempt.
      workers_->Send(rank.worker_id(), message);
    }
  }
}

void JobController::LoseWorkerLocked(const std::string& worker_id, const std::string& reason) {
  auto before = workers_->MarkLost(worker_id, reason);
  if (!before.ok()) return;
  std::fprintf(stderr, "coordinator: worker %s lost: %s\n", worker_id.c_str(), reason.c_str());
  if (before->state() != v1::BUSY || before->job_id().empty()) return;
  auto job = jobs_->Get(before->job_id());
  if (!job.ok() || job->attempt() != before->attempt() || IsTerminal(job->state()) ||
      job->state() == v1::PENDING) {
    return;
  }
  FailAttemptLocked(*job, absl::StrCat(RankName(*job, before->rank()), " was lost: ", reason),
                    worker_id);
}

void JobController::AbortRanksLocked(const v1::Job& job, const std::string& reason,
                                     const std::string& skip_worker) {
  for (const v1::RankAssignment& rank : job.ranks()) {
    if (rank.worker_id() == skip_worker) continue;
    auto worker = workers_->Get(rank.worker_id());
    // Only ranks still on this attempt: one that completed is already idle.
    if (!worker.ok() || worker->job_id() != job.id() || worker->attempt() != job.attempt()) {
      continue;
    }
    v1::CoordinatorMessage message;
    message.mutable_abort()->set_job_id(job.id());
    message.mutable_abort()->set_attempt(job.attempt());
    message.mutable_abort()->set_reason(reason);
    workers_->Send(rank.worker_id(), message);
    workers_->SetDraining(rank.worker_id());
  }
}

void JobController::EndAttemptLocked(const v1::Job& job) {
  auto live = live_.find(job.id());
  if (live != live_.end() && live->second.proposal.has_value()) {
    DecideHookSwitchLocked(job, live->second, /*commit=*/false,
                           absl::StrCat("attempt ", job.attempt(),
                                        " ended before every rank answered"));
  }
  rendezvous_->CloseScope(job.id(), job.attempt());
  live_.erase(job.id());
}

void JobController::FailAttemptLocked(const v1::Job& job, const std::string& reason,
                                      const std::string& lost_worker, bool retryable) {
  AbortRanksLocked(job, absl::StrCat("attempt ", job.attempt(), " failed: ", reason), lost_worker);
  EndAttemptLocked(job);
  const int32_t max_restarts = job.spec().restart_policy().max_restarts();
  if (!retryable) {
    LogError(jobs_->Finish(job.id(), job.attempt(), v1::FAILED,
                           absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                        max_restarts > 0 ? "; not re-queued: every attempt "
                                                           "would fail the same way"
                                                         : ""))
                 .status(),
             "failing job");
  } else if (job.restarts() < max_restarts) {
    LogError(jobs_->Requeue(job.id(), job.attempt(),
                            absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                         "; re-queued (restart ", job.restarts() + 1, " of ",
                                         max_restarts, ")"),
                            /*counts_as_restart=*/true)
                 .status(),
             "re-queueing");
  } else {
    LogError(jobs_->Finish(job.id(), job.attempt(), v1::FAILED,
                           absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                        max_restarts > 0 ? "; no restarts left" : ""))
                 .status(),
             "failing job");
  }
  ScheduleLocked();
}

}  // namespace shardwise
