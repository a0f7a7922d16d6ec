#include "server/job_controller.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "common/random_token.h"
#include "common/status_macros.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_state.h"
#include "contracts/membership.h"
#include "server/scheduler.h"

namespace shardwise {
namespace {

HookSwitchAgreement::Options HookSwitchOptions(const JobController::Options& options) {
  HookSwitchAgreement::Options hook;
  hook.lead = options.hook_switch_lead;
  hook.min_lead_steps = options.hook_switch_min_lead_steps;
  return hook;
}

StallDetector::Options StallOptions(const JobController::Options& options) {
  StallDetector::Options stall;
  stall.heartbeat_interval = options.heartbeat_interval;
  stall.warning = options.stall_warning;
  stall.abort = options.stall_abort;
  return stall;
}

}  // namespace

v1::CoordinatorMessage JobController::AbortMessage(const std::string& job_id, int32_t attempt,
                                                   const std::string& reason) {
  v1::CoordinatorMessage message;
  message.mutable_abort()->set_job_id(job_id);
  message.mutable_abort()->set_attempt(attempt);
  message.mutable_abort()->set_reason(reason);
  return message;
}

LogContext JobController::JobContext(const v1::Job& job) {
  LogContext context;
  context.Job(job.id()).Attempt(job.attempt());
  return context;
}

void JobController::LogIfFailed(const absl::Status& status, const char* what,
                                const LogContext& context) {
  if (!status.ok()) shardwise::LogError(context, absl::StrCat(what, ": ", status.ToString()));
}

void JobController::RecordJobEvent(const v1::Job& job, const std::string& text,
                                   const char* what) const {
  LogIfFailed(jobs_->RecordEvent(job.id(), job.attempt(), text).status(), what, JobContext(job));
}

JobController::JobController(JobManager* jobs, WorkerRegistry* workers, RendezvousStore* rendezvous,
                             const Options& options)
    : jobs_(jobs),
      workers_(workers),
      rendezvous_(rendezvous),
      options_(options),
      clock_(*options.clock),
      hook_switch_options_(HookSwitchOptions(options)),
      stalls_(StallOptions(options)) {
  absl::MutexLock lock(&mu_);
  AwaitReattachments();
  RestoreQuarantinesLocked();
}

JobController::LiveAttempt& JobController::StartLiveAttemptLocked(const v1::Job& job,
                                                                  bool order_recorded) {
  live_.erase(job.id());
  auto [it, inserted] = live_.try_emplace(job.id(), job.attempt(), job.spec().world_size(),
                                          order_recorded, hook_switch_options_);
  stalls_.Track(job.id(), job.attempt(), LiveRanksOf(job));
  return it->second;
}

// The job is validated and written without the controller's lock (a commit must not hold
// up the workers' reports); scheduling it is a pass like any other.
absl::StatusOr<v1::Job> JobController::Submit(const v1::JobSpec& spec, const Submitter& submitter,
                                              const std::string& request_id,
                                              const std::function<bool()>& abandoned) {
  const auto gone = [&] {
    return abandoned && abandoned() ? absl::CancelledError(
                                          "the client went away before its job was admitted; no "
                                          "job was created")
                                    : absl::OkStatus();
  };
  RETURN_IF_ERROR(gone());  // it waited in the queue past its deadline: no work for it
  RETURN_IF_ERROR(CheckPrintableField("request_id", request_id, 128));
  // A retry of a submission that made its job (its reply lost) gets that job, before the
  // checks below: a file, a worker or a default may have changed since, and failing the
  // retry would tell the client no job exists while it runs.
  const std::string fingerprint = SubmittedSpecSha256(spec);
  ASSIGN_OR_RETURN(std::optional<v1::Job> earlier,
                   jobs_->FindSubmission(submitter.name, request_id, fingerprint));
  if (earlier.has_value()) return *std::move(earlier);
  v1::JobSpec effective = spec;
  // Before anything reads a file the spec names: only paths inside the roots, canonical.
  ASSIGN_OR_RETURN(const v1::SubmitterRoots roots, CheckPaths(submitter, &effective));
  RETURN_IF_ERROR(ValidateJobSpec(effective, options_.limits,
                                  options_.check_paths ? PathChecker(CheckReadableFile) : nullptr));
  ApplyJobSpecDefaults(&effective);
  ASSIGN_OR_RETURN(const MemoryEstimate memory, EstimateRankMemory(effective));
  // One reading of the registry for both checks: the workers they weigh are the same.
  const PendingJob pending = PendingJobOf("", effective, memory.total(), roots.principal());
  const std::vector<IdleWorker> registered = workers_->Offers(effective.device());
  RETURN_IF_ERROR(CheckSomeWorkerHasMemory(pending, registered, memory.ToString()));
  RETURN_IF_ERROR(CheckSomeWorkerWouldTake(pending, registered));
  RETURN_IF_ERROR(gone());
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Submit(effective, memory.ToProto(), submitter.name,
                                              request_id, roots, fingerprint));
  absl::MutexLock lock(&mu_);
  RequestScheduleLocked();
  return job;
}

absl::StatusOr<v1::SubmitterRoots> JobController::CheckPaths(const Submitter& submitter,
                                                             v1::JobSpec* spec) const {
  if (!options_.path_policy.has_value()) return v1::SubmitterRoots();
  const PathCheck check = options_.check_paths ? PathCheck::kOnDisk : PathCheck::kLexical;
  if (!submitter.paths.any()) {
    RETURN_IF_ERROR(ApplyPathPolicy(*options_.path_policy, check, spec));
    return v1::SubmitterRoots();
  }
  v1::SubmitterRoots roots = options_.path_policy->RootsOf(submitter.name, submitter.paths);
  RETURN_IF_ERROR(ApplyPathPolicy(options_.path_policy->Narrowed(roots), check, spec));
  return roots;
}

absl::StatusOr<v1::Job> JobController::Cancel(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Current(job_id));
  // Idempotent, so that a client may ask again (a reply lost, or late): a job cancelled
  // already is returned as it is.
  if (job.state() == v1::CANCELLED) return job;
  if (IsTerminal(job.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job ", job_id, " already ended as ",
                                                      v1::JobState_Name(job.state()),
                                                      "; nothing to cancel"));
  }
  const std::string reason = "cancelled by request";
  // Written first: a cancellation the state file refused is UNAVAILABLE with the job
  // running on, never ranks stopped for a job a restarted coordinator would run again.
  ASSIGN_OR_RETURN(v1::Job cancelled, jobs_->Cancel(job_id, reason));
  if (job.state() != v1::PENDING) {
    // That write abandoned a switch being agreed; the ranks, stopped here, need no word.
    if (auto live = live_.find(job_id); live != live_.end()) live->second.hook_switch.EndProposal();
    AbortRanksLocked(job, reason, /*skip_worker=*/"");
    EndAttemptLocked(job);
  }
  RequestScheduleLocked();
  return cancelled;
}

void JobController::SendToRanksLocked(const v1::Job& job, const v1::CoordinatorMessage& message) {
  for (const v1::RankAssignment& rank : job.ranks()) workers_->Send(rank.worker_id(), message);
}

// While the coordinator stops, a daemon told it is going away must wait for the next one:
// a registration taken now would lose the rank the worker still runs (its session was
// closed by the stop, not by the worker), which a crashed coordinator never would.
absl::Status JobController::RefuseWhileStoppingLocked() const {
  if (!stopping_) return absl::OkStatus();
  return absl::UnavailableError(
      "the coordinator is stopping; register with the one that replaces it");
}

absl::StatusOr<v1::RegisterWorkerResponse> JobController::RegisterWorker(
    const v1::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(RefuseWhileStoppingLocked());
  v1::RegisterWorkerRequest named = request;
  // Fields of a newer release (or a hostile one's padding) would be kept with the worker's
  // record, copied into every listing and scheduling pass: only the fields read are kept.
  named.DiscardUnknownFields();
  if (named.name().empty()) named.set_name("worker");
  ASSIGN_OR_RETURN(const WorkerRegistry::Registration registration, workers_->Register(named));
  busy_refusals_.erase(registration.worker_id);  // a new daemon (a fixed release?) begins anew
  // A daemon that registers again while we think it runs an attempt has restarted, or
  // reconnected before its old session was seen to close: either way the attempt lost
  // that rank's session (its reports and aborts went over it). Unless it repeats a
  // re-attaching registration whose answer it did not get in time (its deadline passed as
  // this coordinator, just started, answered): no session has opened since, so nothing
  // went over one, and its rank is re-attached again.
  const v1::WorkerInfo& before = registration.previous;
  const bool repeated = RepeatsReattachmentLocked(registration.worker_id, before, named);
  if ((before.state() == v1::BUSY || before.state() == v1::DRAINING) && !before.job_id().empty() &&
      !repeated) {
    auto job = jobs_->Current(before.job_id());
    if (job.ok() && job->attempt() == before.attempt() && !IsTerminal(job->state()) &&
        job->state() != v1::PENDING) {
      const bool still_running = named.has_running() &&
                                 named.running().job_id() == before.job_id() &&
                                 named.running().attempt() == before.attempt();
      LoseWorkersRankLocked(*job, before.rank(),
                            still_running
                                ? "the worker reconnected (a new session while it still ran "
                                  "the attempt) before its old session closed"
                                : "the worker restarted and registered again",
                            registration.worker_id, /*planned_stop=*/false);
    }
  }
  // After a restart: the worker may run a rank of an attempt waiting for its ranks.
  const bool reattached =
      named.has_running() && ReattachLocked(registration.worker_id, named.running(), repeated);
  if (!reattached) OnRankBackWithoutAttemptLocked(registration.worker_id);
  if (named.has_running() && !reattached) {
    workers_->DrainOnAttach(registration.worker_id,
                            AbortMessage(named.running().job_id(), named.running().attempt(),
                                         "the coordinator is not running this attempt"));
  }
  v1::RegisterWorkerResponse response;
  response.set_reattached(reattached);
  response.set_worker_id(registration.worker_id);
  response.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  return response;
}

absl::Status JobController::OpenSession(const std::string& worker_id,
                                        const std::shared_ptr<SessionOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(RefuseWhileStoppingLocked());
  RETURN_IF_ERROR(workers_->AttachSession(worker_id, outbox));
  ResyncReattachedLocked(worker_id);
  RequestScheduleLocked();
  return absl::OkStatus();
}

void JobController::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void JobController::CloseSession(const std::string& worker_id,
                                 const std::shared_ptr<SessionOutbox>& outbox) {
  absl::MutexLock lock(&mu_);
  if (workers_->DetachSession(worker_id, outbox) && !stopping_) {
    if (workers_->IsStopping(worker_id)) {
      // Planned (a rollout, a scale-down, a drained node): gone, but no failure detected.
      LoseWorkerLocked(worker_id, "it stopped: its daemon was told to (SIGTERM)", nullptr);
    } else if (outbox->overflowed()) {
      LoseWorkerLocked(worker_id,
                       absl::StrCat("it left ", SessionOutbox::kMaxQueuedMessages,
                                    " of the coordinator's messages unread (its daemon's "
                                    "session reader is stuck)"),
                       "session_unread");
    } else {
      LoseWorkerLocked(worker_id, "its session closed", "session_closed");
    }
  }
}

void JobController::OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& heartbeat,
                                const SessionOutbox* session) {
  auto worker = workers_->Heartbeat(
      worker_id,
      heartbeat.has_messages_read()
          ? std::optional<uint64_t>(std::max<int64_t>(0, heartbeat.messages_read()))
          : std::nullopt,
      // Before its session closes: that end is then a planned stop, and no job is placed
      // on it meanwhile.
      session, heartbeat.stopping());
  if (!worker.ok()) return;
  const bool assigned = worker->state == v1::BUSY || worker->state == v1::DRAINING;
  const bool same_attempt =
      assigned && heartbeat.job_id() == worker->job_id && heartbeat.attempt() == worker->attempt;
  if (!heartbeat.job_id().empty() && !same_attempt) {
    // A leftover from an attempt that ended (or from before a coordinator restart).
    workers_->Send(worker_id, AbortMessage(heartbeat.job_id(), heartbeat.attempt(),
                                           "the coordinator is not running this attempt"));
    return;
  }
  if (same_attempt && heartbeat.has_position()) {
    stalls_.Record(heartbeat.job_id(), heartbeat.attempt(), worker->rank, heartbeat.position(),
                   clock_.Now());
    // A rank that re-attached before its collective failed says so in its position: rare,
    // and the decision takes the controller's lock, so it goes to the executor.
    if (heartbeat.position().phase() == kAwaitingMembershipPhase) {
      if (options_.executor == nullptr) {
        OnPeerLostWhileReattaching(heartbeat.job_id(), heartbeat.attempt());
      } else {
        options_.executor->PostOnce(
            absl::StrCat("peer lost while reattaching ", heartbeat.job_id(), "#",
                         heartbeat.attempt()),
            [this, job_id = heartbeat.job_id(), attempt = heartbeat.attempt()] {
              OnPeerLostWhileReattaching(job_id, attempt);
            });
      }
    }
  }
  if (heartbeat.job_id().empty() && worker->state == v1::DRAINING) {
    if (options_.executor == nullptr) {
      ReturnToIdle(worker_id);
    } else {
      options_.executor->PostOnce(absl::StrCat("return to idle ", worker_id),
                                  [this, worker_id] { ReturnToIdle(worker_id); });
    }
  }
}

void JobController::ReturnToIdle(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto worker = workers_->Get(worker_id);
  if (!worker.ok() || worker->state() != v1::DRAINING) return;  // something happened since
  workers_->SetIdle(worker_id);
  RequestScheduleLocked();
}

void JobController::OnReport(const std::string& worker_id, const v1::AttemptReport& report) {
  absl::MutexLock lock(&mu_);
  // Whatever attempt it names: the worker speaks for itself.
  if (report.worker_leaving()) workers_->MarkStopping(worker_id);
  auto job = jobs_->Current(report.job_id());
  auto live = live_.find(report.job_id());
  if (!job.ok() || live == live_.end() || live->second.attempt != report.attempt() ||
      job->attempt() != report.attempt()) {
    return;  // a late report of an attempt that already ended
  }
  // Only the worker that holds a rank may speak for it, and only while it runs it: once
  // the rank completed or left, its worker is idle or runs another job, which a late or
  // repeated report (ABORTED, COMPLETED again) must neither release nor count twice.
  if (WorkerOfRank(*job, report.rank()) != worker_id ||
      !workers_->Runs(worker_id, report.job_id(), report.attempt(), report.rank())) {
    LogWarning(LogContext().Job(report.job_id()).Attempt(report.attempt()).Worker(worker_id),
               absl::StrCat("ignoring a report for rank ", report.rank(),
                            ", which the worker does not run now"));
    return;
  }
  LiveAttempt& attempt = live->second;
  // The worker took an assignment: the refusals it made before were honest.
  if (!(report.phase() == v1::ABORTED && report.worker_busy())) busy_refusals_.erase(worker_id);
  if (report.spans_size() > 0 || report.spans_dropped() > 0) {
    timelines_.Add(report.job_id(), report.attempt(), report.rank(), worker_id,
                   {report.spans().begin(), report.spans().end()}, report.spans_dropped());
  }
  switch (report.phase()) {
    case v1::JOINED:
      attempt.joined.insert(report.rank());
      if (static_cast<int32_t>(attempt.joined.size()) == job->spec().world_size() &&
          job->state() == v1::SCHEDULED) {
        auto running = jobs_->MarkRunning(job->id(), report.attempt());
        LogIfFailed(running.status(), "marking running", JobContext(*job));
        // An attempt of a job scaled down places every rank: those above go now.
        if (running.ok()) AskGroupsAboveTargetToLeaveLocked(*running);
      }
      break;
    case v1::PROGRESS:
      OnRankProgressLocked(*job, attempt, report);
      break;
    case v1::COMPLETED:
      OnRankCompletedLocked(*job, attempt, report, worker_id);
      break;
    case v1::ORDER_RECORDED:
    case v1::ORDER_CHANGED:
      ApplyOrderDecisionLocked(*job, attempt, attempt.order.OnReport(*job, report));
      break;
    case v1::LEAVING:
      LeaveLocked(*job, report.rank(),
                  absl::StrCat(RankName(*job, report.rank()), " is leaving: ", report.message()),
                  worker_id);
      break;
    case v1::STATE_RECEIVED:
      RecordStateReceivedLocked(*job, attempt, report);
      break;
    case v1::EPOCH_STARTED:
      RecordEpochStartedLocked(*job, attempt, report);
      break;
    case v1::ABORTED:
      OnRankAbortedLocked(*job, attempt, report, worker_id);
      break;
    default:
      break;
  }
}

void JobController::OnRankProgressLocked(const v1::Job& job, LiveAttempt& attempt,
                                         const v1::AttemptReport& report) {
  attempt.joining.erase(report.rank());
  attempt.longest_step =
      std::max(attempt.longest_step, absl::Seconds(report.progress().step_seconds()));
  if (report.rank() == SpeakerOf(job, attempt)) {
    LogIfFailed(jobs_->UpdateProgress(job.id(), report.attempt(), report.progress()),
                "recording progress", JobContext(job));
  }
  // Any rank's: the speaker may be a replacement that loaded no checkpoint.
  if (report.progress().has_checkpoint_step()) {
    LogIfFailed(jobs_->RecordCheckpointStep(job.id(), report.attempt(),
                                            report.progress().checkpoint_step()),
                "recording the newest checkpoint", JobContext(job));
  }
  if (report.progress().has_init_checkpoint_step() && !job.has_init_checkpoint_step()) {
    LogIfFailed(jobs_
                    ->RecordInitCheckpoint(job.id(), report.attempt(),
                                           report.progress().init_checkpoint_step())
                    .status(),
                "recording the initial checkpoint", JobContext(job));
  }
}

void JobController::OnRankAbortedLocked(const v1::Job& job, LiveAttempt& attempt,
                                        const v1::AttemptReport& report,
                                        const std::string& worker_id) {
  if (report.worker_busy()) {
    workers_->AwaitIdle(worker_id);
  } else if (!report.worker_leaving()) {
    workers_->SetIdle(worker_id);
  }
  if (report.worker_busy() && job.state() == v1::SCHEDULED) {
    OnRankRefusedAsBusyLocked(job, report, worker_id);
  } else if (report.worker_leaving() && job.state() == v1::SCHEDULED) {
    // Its worker is shutting down before the attempt trained (it refused the assignment,
    // or stopped while the ranks joined): the job is placed again, its restarts untouched,
    // as after a rendezvous that never completed.
    RequeueWithoutRestartLocked(job,
                                absl::StrCat(RankName(job, report.rank()),
                                             " left before the attempt ran: ", report.message()));
  } else if (report.inputs_missing() && options_.quarantine > absl::ZeroDuration() &&
             ((job.state() == v1::SCHEDULED && !attempt.awaiting_reattach) ||
              (job.state() == v1::RUNNING && job.spec().has_fault_tolerance()))) {
    // Its host's fault or the job's, as the other ranks show (in a running attempt only a
    // replacement checks its paths: its host's); without quarantines a host could not be
    // kept out, and it fails the job as any missing input does.
    OnInputsMissingLocked(job, attempt, report, worker_id);
  } else if (report.worker_fault() && job.state() == v1::SCHEDULED &&
             options_.quarantine > absl::ZeroDuration()) {
    // Its worker could not run it (no thread left: a pids limit): the worker's fault, not
    // the job's. Kept out of scheduling, or the job would be placed on it again; without
    // quarantines the restart policy bounds it as any failure.
    QuarantineLocked(job, {report.rank()},
                     absl::StrCat("could not run on its worker: ", report.message()), clock_.Now());
  } else {
    OnRankFailedLocked(job, attempt, report, worker_id);
  }
  RequestScheduleLocked();  // the worker may be idle for a job, or a replacement group
}

void JobController::OnRankRefusedAsBusyLocked(const v1::Job& job, const v1::AttemptReport& report,
                                              const std::string& worker_id) {
  int& refusals = busy_refusals_[worker_id];
  if (++refusals < kBusyRefusalsBeforeQuarantine) {
    // Another attempt of the worker's is still ending (one stuck in a collective). Not
    // the job's failure: placed again, its restarts untouched.
    RequeueWithoutRestartLocked(job, absl::StrCat(RankName(job, report.rank()),
                                                  " refused the assignment: ", report.message()));
    return;
  }
  busy_refusals_.erase(worker_id);
  QuarantineLocked(job, {report.rank()},
                   absl::StrCat("refused ", kBusyRefusalsBeforeQuarantine,
                                " assignments in a row as still running another attempt, though "
                                "its heartbeats between them said it ran none (the last: ",
                                report.message(), ")"),
                   clock_.Now());
}

namespace {

// Whether `rank` led a membership of `job`'s attempt: the first of the current one's
// `live` ranks, or of an earlier epoch the history keeps, or rank 0, which leads epoch 0
// (every rank live).
bool LedAMembership(const v1::Job& job, const std::vector<int32_t>& live, int32_t rank) {
  if (rank == 0 || (!live.empty() && live.front() == rank)) return true;
  return std::any_of(job.membership_history().begin(), job.membership_history().end(),
                     [&](const v1::MembershipEpoch& epoch) {
                       return epoch.attempt() == job.attempt() && epoch.live_ranks_size() > 0 &&
                              epoch.live_ranks(0) == rank;
                     });
}

}  // namespace

void JobController::OnRankCompletedLocked(const v1::Job& job, LiveAttempt& attempt,
                                          const v1::AttemptReport& report,
                                          const std::string& worker_id) {
  attempt.completed.insert(report.rank());
  attempt.joining.erase(report.rank());
  workers_->SetIdle(worker_id);
  // The rank says whether it led: after a loss at the very end, the newest membership's
  // first rank may have completed as a follower, without writing the job's outputs. In
  // the attempt's first membership rank 0 leads whatever it says: a worker of a release
  // before `led` says nothing.
  // Only a rank that led a membership of the attempt may say it led: one whose group left
  // without it ever leading (a drained rank, a lost rank's mate) completes as a follower
  // whatever it says. A leader dropped with its group after it wrote the outputs (its
  // mate lost meanwhile) still led.
  const bool leader = (report.led() && LedAMembership(job, LiveRanksOf(job), report.rank())) ||
                      (job.membership().epoch() == 0 && report.rank() == 0);
  if (leader) {
    attempt.led_completed = true;
    attempt.result = report.message();
    LogIfFailed(jobs_->UpdateProgress(job.id(), report.attempt(), report.progress()),
                "recording progress", JobContext(job));
  }
  // Kept with the job (written within a second): a coordinator restarted before the other
  // ranks complete must not wait for this one, nor re-queue the job without it.
  LogIfFailed(jobs_->RecordCompletion(job.id(), report.attempt(), report.rank(), leader,
                                      leader ? report.message() : ""),
              "recording a rank's completion", JobContext(job));
  FinishIfCompletedLocked(job);
  RequestScheduleLocked();
}

void JobController::FinishIfCompletedLocked(const v1::Job& job) {
  auto live = live_.find(job.id());
  if (live == live_.end() || live->second.attempt != job.attempt()) return;
  // A replacement that has not trained yet is not waited for: the others are done.
  const LiveAttempt& attempt = live->second;
  const std::vector<int32_t> live_ranks = LiveRanksOf(job);
  if (!std::all_of(live_ranks.begin(), live_ranks.end(), [&](int32_t rank) {
        return attempt.completed.count(rank) > 0 || attempt.joining.count(rank) > 0;
      })) {
    return;
  }
  if (!attempt.led_completed) {
    // The rank that led at the end was lost before it completed: the others, followers
    // when they ended, wrote nothing. Another attempt resumes and writes the outputs.
    return FailAttemptLocked(job,
                             absl::StrCat("attempt ", job.attempt(),
                                          ": every live rank completed, but the rank that "
                                          "led at the end was lost before it wrote the job's "
                                          "outputs"),
                             /*lost_worker=*/"", /*retryable=*/true);
  }
  const std::string result = attempt.result;
  const std::set<int32_t> joining = attempt.joining;  // EndAttemptLocked forgets `attempt`
  EndAttemptLocked(job);
  LogIfFailed(
      jobs_
          ->Finish(job.id(), job.attempt(), v1::SUCCEEDED,
                   absl::StrCat("attempt ", job.attempt(), ": every rank completed"), result)
          .status(),
      "finishing job", JobContext(job));
  // After the write, as FailAttemptLocked's; only workers still on this attempt: a
  // replacement still joining, or a rank of a group leaving it (scaled down, its worker
  // stopping), whose last report would now come for an ended attempt and free nothing.
  for (const v1::RankAssignment& rank : job.ranks()) {
    if (!RunsAttemptLocked(rank.worker_id(), job)) continue;
    workers_->Drain(rank.worker_id(),
                    AbortMessage(job.id(), job.attempt(),
                                 joining.count(rank.rank()) > 0
                                     ? "the job completed before this replacement joined it"
                                     : "the job completed while this rank's group left it"));
  }
}

absl::StatusOr<v1::Timeline> JobController::GetTimeline(const std::string& job_id) const {
  RETURN_IF_ERROR(jobs_->Current(job_id).status());
  v1::Timeline timeline = timelines_.Get(job_id);
  if (timeline.ranks_size() > 0) return timeline;
  auto kept = jobs_->LoadTimeline(job_id);
  if (absl::IsNotFound(kept.status())) return timeline;  // none was sent
  return kept;
}

void JobController::CheckHeartbeats() {
  absl::MutexLock lock(&mu_);
  for (const std::string& worker_id : workers_->Silent(options_.heartbeat_timeout)) {
    LoseWorkerLocked(worker_id,
                     absl::StrCat("no heartbeat for more than ",
                                  absl::FormatDuration(options_.heartbeat_timeout)),
                     "heartbeat_timeout");
  }
  // A daemon that heartbeats but reads nothing (its session's reader is stuck) cannot be
  // told to abort or to start: as good as lost, and its queue would grow without bound.
  for (const std::string& worker_id : workers_->Unread(options_.unread_timeout)) {
    LoseWorkerLocked(worker_id,
                     absl::StrCat("it read none of the coordinator's messages for more than ",
                                  absl::FormatDuration(options_.unread_timeout),
                                  " (its daemon's session reader is stuck)"),
                     "session_unread");
  }
  const absl::Time now = clock_.Now();
  HandleStallsLocked(now);
  CheckReattachDeadlinesLocked(now);
  CheckMissingInputsLocked(now);  // first: decided by the join deadline, as the job's
  CheckJoinDeadlinesLocked(now);
  CheckHeldFailuresLocked(now);
  for (const std::string& forgotten : workers_->RemoveLongLost()) {
    LogInfo(LogContext().Worker(forgotten), "forgotten: lost for longer than the retention");
  }
}

void JobController::Schedule() {
  absl::MutexLock lock(&mu_);
  ScheduleLocked();
}

void JobController::RequestScheduleLocked() {
  if (options_.executor == nullptr) {
    ScheduleLocked();
    return;
  }
  if (schedule_posted_) return;
  schedule_posted_ = true;
  options_.executor->Post([this] {
    absl::MutexLock lock(&mu_);
    schedule_posted_ = false;
    ScheduleLocked();
  });
}

void JobController::ScheduleLocked() {
  PlacePendingJobsLocked();
  HealDegradedAttemptsLocked();  // with the workers pending jobs left idle
}

void JobController::PlacePendingJobsLocked() {
  const std::vector<PendingJob> pending = jobs_->PendingJobs();
  if (pending.empty()) return;
  std::vector<IdleWorker> idle, registered;
  for (v1::DeviceKind device : {v1::CPU, v1::CUDA}) {
    for (const v1::WorkerInfo& worker : workers_->Idle(device)) {
      idle.push_back(WorkerOffer(worker));
    }
    for (IdleWorker& offer : workers_->Offers(device)) registered.push_back(std::move(offer));
  }
  const std::vector<Placement> placements = PlanGangPlacements(pending, idle, &registered);
  std::set<std::string> placed;
  for (const Placement& placement : placements) placed.insert(placement.job_id);
  // Jobs left waiting say what for, counting the workers of their kind that exist.
  for (const PendingJob& job : pending) {
    if (placed.count(job.job_id) > 0) continue;
    jobs_->SetPendingReason(job.job_id,
                            PendingReason(job.world_size, job.device, SupplyFor(job, registered)));
  }
  if (placements.empty()) return;
  WriteCompletionsBeforePlacingLocked();
  for (const Placement& placement : placements) {
    StartAttemptLocked(placement.job_id, placement.worker_ids);
  }
}

void JobController::WriteCompletionsBeforePlacingLocked() {
  LogIfFailed(jobs_->FlushProgress(), "writing completions before a placement");
}

void JobController::StartAttemptLocked(const std::string& job_id,
                                       const std::vector<std::string>& worker_ids) {
  std::vector<v1::RankAssignment> ranks;
  for (size_t r = 0; r < worker_ids.size(); ++r) {
    v1::RankAssignment assignment;
    assignment.set_rank(static_cast<int32_t>(r));
    assignment.set_worker_id(worker_ids[r]);
    ranks.push_back(assignment);
  }
  auto job = jobs_->Schedule(job_id, ranks);
  if (!job.ok()) {
    LogIfFailed(job.status(), "scheduling");
    return;
  }
  // One secret per rank, sent only over that rank's session: the key to the attempt's
  // rendezvous scope.
  std::vector<std::string> tokens;
  for (size_t r = 0; r < worker_ids.size(); ++r) tokens.push_back(RandomToken());
  rendezvous_->OpenScope(job->id(), job->attempt(), tokens);
  LiveAttempt& live = StartLiveAttemptLocked(*job, /*order_recorded=*/false);
  live.join_deadline = clock_.Now() + absl::Seconds(JoinTimeoutSeconds(job->spec()));
  for (const v1::RankAssignment& rank : job->ranks()) {
    workers_->SetBusy(rank.worker_id(), job->id(), job->attempt(), rank.rank());
    // A worker whose session closed in between is lost through CloseSession, which
    // then fails this attempt.
    workers_->Send(rank.worker_id(), AssignmentMessage(*job, rank.rank(), tokens[rank.rank()]));
  }
}

v1::CoordinatorMessage JobController::AssignmentMessage(const v1::Job& job, int32_t rank,
                                                        const std::string& token) const {
  v1::CoordinatorMessage message;
  v1::Assignment* assignment = message.mutable_assignment();
  assignment->set_job_id(job.id());
  assignment->set_job_uid(job.uid());
  assignment->set_attempt(job.attempt());
  assignment->set_rank(rank);
  assignment->set_world_size(job.spec().world_size());
  *assignment->mutable_spec() = job.spec();
  *assignment->mutable_hook_switches() = job.hook_switches();
  if (job.has_init_checkpoint_step()) {
    assignment->set_init_checkpoint_step(job.init_checkpoint_step());
  }
  if (job.has_checkpoint_step()) assignment->set_checkpoint_step(job.checkpoint_step());
  assignment->set_collective_timeout_ms(absl::ToInt64Milliseconds(options_.collective_timeout));
  if (options_.path_policy.has_value()) {
    *assignment->mutable_path_policy() = options_.path_policy->ToProto();
    // The submitter's own folders as they were at submission (a tokens-file edit since
    // does not move a job's files).
    if (job.has_submitter_roots()) {
      *assignment->mutable_path_policy()->mutable_submitter() = job.submitter_roots();
    }
  }
  assignment->set_rendezvous_token(token);
  return message;
}

void JobController::LoseWorkerLocked(const std::string& worker_id, const std::string& reason,
                                     const char* kind) {
  auto before = workers_->MarkLost(worker_id, reason);
  if (!before.ok()) return;
  busy_refusals_.erase(worker_id);
  if (options_.metrics != nullptr && kind != nullptr) {
    options_.metrics->failure_detections_total.With({kind}).Increment();
  }
  LogWarning(LogContext().Job(before->job_id()).Attempt(before->attempt()).Worker(worker_id),
             absl::StrCat("worker lost: ", reason));
  if (before->state() != v1::BUSY || before->job_id().empty()) return;
  auto job = jobs_->Current(before->job_id());
  if (!job.ok() || job->attempt() != before->attempt() || IsTerminal(job->state()) ||
      job->state() == v1::PENDING) {
    return;
  }
  LoseWorkersRankLocked(*job, before->rank(), reason, worker_id, /*planned_stop=*/kind == nullptr);
}

void JobController::LoseWorkersRankLocked(const v1::Job& job, int32_t rank,
                                          const std::string& reason, const std::string& worker_id,
                                          bool planned_stop) {
  auto live = live_.find(job.id());
  if (job.state() == v1::SCHEDULED && live != live_.end() &&
      live->second.attempt == job.attempt() && live->second.joined.count(rank) == 0) {
    if (planned_stop) {
      // As a refusal with worker_leaving: the daemon may have refused the assignment
      // after its session's last write (it stops as told), and its next pod may take
      // its name; no fault of the worker's.
      return RequeueWithoutRestartLocked(
          job, absl::StrCat(RankName(job, rank), " left before the attempt ran: ", reason));
    }
    // Its worker went (a node that lost power still looked idle until its heartbeats were
    // missed) before the rank joined: nothing of the job's doing, as a rank that never
    // reached the rendezvous, and quarantined as that one is, so that a worker the job's
    // start itself kills cannot re-queue it without end.
    return QuarantineLocked(job, {rank}, absl::StrCat("was lost before it joined: ", reason),
                            clock_.Now());
  }
  LoseRankLocked(job, rank, absl::StrCat(RankName(job, rank), " was lost: ", reason), worker_id);
}

void JobController::AbortRanksLocked(const v1::Job& job, const std::string& reason,
                                     const std::string& skip_worker) {
  for (const v1::RankAssignment& rank : job.ranks()) {
    if (rank.worker_id() == skip_worker) continue;
    // Only ranks still on this attempt: one that completed is already idle.
    if (!RunsAttemptLocked(rank.worker_id(), job)) continue;
    workers_->Drain(rank.worker_id(), AbortMessage(job.id(), job.attempt(), reason));
  }
}

bool JobController::RunsAttemptLocked(const std::string& worker_id, const v1::Job& job) const {
  auto worker = workers_->Get(worker_id);
  return worker.ok() && worker->job_id() == job.id() && worker->attempt() == job.attempt();
}

void JobController::EndAttemptLocked(const v1::Job& job) {
  auto live = live_.find(job.id());
  if (live != live_.end() && live->second.hook_switch.proposing()) {
    DecideHookSwitchLocked(
        job, live->second, /*commit=*/false,
        absl::StrCat("attempt ", job.attempt(), " ended before every rank answered"));
  }
  rendezvous_->CloseScope(job.id(), job.attempt());
  stalls_.Forget(job.id());
  live_.erase(job.id());
  // Kept in the state file (its newest spans): memory holds the timelines of the most
  // recent jobs only.
  const v1::Timeline timeline = timelines_.Get(job.id(), options_.stored_timeline_spans);
  if (timeline.attempt() == job.attempt() && timeline.ranks_size() > 0) {
    LogIfFailed(jobs_->SaveTimeline(timeline), "keeping a timeline", JobContext(job));
  }
}

void JobController::FailAttemptLocked(const v1::Job& job, const std::string& reason,
                                      const std::string& lost_worker, bool retryable) {
  EndAttemptLocked(job);
  const int32_t max_restarts = job.spec().restart_policy().max_restarts();
  if (!retryable) {
    LogIfFailed(jobs_
                    ->Finish(job.id(), job.attempt(), v1::FAILED,
                             absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                          max_restarts > 0 ? "; not re-queued: every attempt "
                                                             "would fail the same way"
                                                           : ""))
                    .status(),
                "failing job", JobContext(job));
  } else if (job.restarts() < max_restarts) {
    LogIfFailed(jobs_
                    ->Requeue(job.id(), job.attempt(),
                              absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                           "; re-queued (restart ", job.restarts() + 1, " of ",
                                           max_restarts, ")"),
                              /*counts_as_restart=*/true)
                    .status(),
                "re-queueing", JobContext(job));
  } else {
    LogIfFailed(jobs_
                    ->Finish(job.id(), job.attempt(), v1::FAILED,
                             absl::StrCat("attempt ", job.attempt(), " failed: ", reason,
                                          max_restarts > 0 ? "; no restarts left" : ""))
                    .status(),
                "failing job", JobContext(job));
  }
  // Only once the outcome is written: ranks stopped by a coordinator that then died before
  // writing it would be taken, after its restart, for ranks lost with it, and the job
  // re-queued without a restart counted (even one that had none left).
  AbortRanksLocked(job, absl::StrCat("attempt ", job.attempt(), " failed: ", reason), lost_worker);
  RequestScheduleLocked();
}

}  // namespace shardwise
