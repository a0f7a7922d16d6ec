// The coordinator's half of a communication-hook switch (HookSwitchAgreement decides;
// this records, sends and acts on it): a client's request becomes a proposal of a step no
// rank has reached, the ranks' acknowledgements commit or abandon it, and an abandoned
// switch is proposed again at a later step. docs/operations.md explains the protocol.

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/comm_hook.h"
#include "contracts/job_spec_defaults.h"
#include "server/job_controller.h"

namespace shardwise {

absl::StatusOr<v1::HookSwitch> JobController::SetCommHook(const std::string& job_id,
                                                          const v1::CommHook& hook) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(v1::Job job, jobs_->Current(job_id));
  // A hook wrong for the job (unknown, unfit for its precision) is, whatever its state;
  // the error names the request's field (SetCommHookRequest.hook).
  RETURN_IF_ERROR(ValidateCommHook(hook, job.spec(), "hook"));
  auto live = live_.find(job_id);
  if (job.state() != v1::RUNNING || live == live_.end() || live->second.attempt != job.attempt()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", v1::JobState_Name(job.state()),
                     "; its communication hook can change only while it is RUNNING"));
  }
  if (live->second.awaiting_reattach) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id,
                     "'s ranks are re-attaching after a coordinator restart; try again "
                     "once they are back (describe shows it)"));
  }
  if (SameHook(HookInEffect(job), hook)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already uses ", CommHookName(hook)));
  }
  LiveAttempt& attempt = live->second;
  RETURN_IF_ERROR(attempt.hook_switch.BeginRequest(job));
  return ProposeHookSwitchLocked(job, attempt, hook, /*not_before=*/0, clock_.Now());
}

absl::StatusOr<v1::HookSwitch> JobController::ProposeHookSwitchLocked(const v1::Job& job,
                                                                      LiveAttempt& attempt,
                                                                      const v1::CommHook& hook,
                                                                      int64_t not_before,
                                                                      absl::Time request_time) {
  ASSIGN_OR_RETURN(const v1::HookSwitch proposal,
                   attempt.hook_switch.MakeProposal(job, hook, not_before, request_time));
  ASSIGN_OR_RETURN(
      v1::Job updated,
      jobs_->RecordHookSwitch(job.id(), proposal,
                              absl::StrCat("comm hook switch ", proposal.version(),
                                           " proposed: ", CommHookName(proposal.old_hook()), " -> ",
                                           CommHookName(hook), " at step ", proposal.step()),
                              // Written before the ranks hear of it: a proposal a restarted
                              // coordinator does not know would hold them at its step.
                              /*durable=*/true));
  attempt.hook_switch.Proposed(proposal);
  SendToRanksLocked(updated, HookChangeMessage(job, proposal));
  return proposal;
}

v1::CoordinatorMessage JobController::HookChangeMessage(const v1::Job& job,
                                                        const v1::HookSwitch& proposal) {
  v1::CoordinatorMessage message;
  v1::HookChange* change = message.mutable_hook_change();
  change->set_job_id(job.id());
  change->set_attempt(job.attempt());
  change->set_version(proposal.version());
  *change->mutable_hook() = proposal.new_hook();
  change->set_step(proposal.step());
  return message;
}

void JobController::ReconsiderHookSwitchLocked(const v1::Job& job,
                                               const std::vector<std::string>& joiners) {
  auto live = live_.find(job.id());
  if (live == live_.end() || live->second.attempt != job.attempt()) return;
  LiveAttempt& attempt = live->second;
  const std::optional<v1::HookSwitch>& proposal = attempt.hook_switch.proposal();
  if (!proposal.has_value()) return;
  // A replacement never heard the proposal: it answers as the others did.
  for (const std::string& worker : joiners)
    workers_->Send(worker, HookChangeMessage(job, *proposal));
  if (attempt.hook_switch.Reconsider(job).kind == HookSwitchAgreement::AckDecision::Kind::kCommit) {
    DecideHookSwitchLocked(job, attempt, /*commit=*/true, "");
  }
}

void JobController::OnHookAck(const std::string& worker_id, const v1::HookChangeAck& ack) {
  absl::MutexLock lock(&mu_);
  auto job = jobs_->Current(ack.job_id());
  auto live = live_.find(ack.job_id());
  if (!job.ok() || live == live_.end() || live->second.attempt != ack.attempt()) {
    return;  // an attempt that ended
  }
  int32_t rank = -1;
  for (const v1::RankAssignment& r : job->ranks()) {
    if (r.worker_id() == worker_id) rank = r.rank();
  }
  LiveAttempt& attempt = live->second;
  const HookSwitchAgreement::AckDecision decision = attempt.hook_switch.OnAck(*job, rank, ack);
  switch (decision.kind) {
    case HookSwitchAgreement::AckDecision::Kind::kNone:
      return;
    case HookSwitchAgreement::AckDecision::Kind::kCommit:
      DecideHookSwitchLocked(*job, attempt, /*commit=*/true, "");
      return;
    case HookSwitchAgreement::AckDecision::Kind::kAbandon: {
      v1::HookSwitch rejected = *attempt.hook_switch.EndProposal();
      // Said in the same write as the abandon, so that no client reads it as the end.
      rejected.set_proposed_again(decision.retry_after.has_value());
      DecideHookSwitchLocked(*job, attempt, /*commit=*/false, decision.reason, rejected);
      if (!decision.retry_after.has_value()) return;
      auto again = jobs_->Current(ack.job_id());
      if (!again.ok()) return;
      LogIfFailed(
          ProposeHookSwitchLocked(*again, attempt, rejected.new_hook(), *decision.retry_after + 1,
                                  absl::FromUnixMillis(rejected.request_time_ms()))
              .status(),
          "re-proposing a hook switch", JobContext(*again));
      return;
    }
  }
}

// The decision is written before any rank hears it: a coordinator that crashes between
// the two abandons the switch when it restarts (JobManager), which is right only if no
// rank was told to commit. A commit the state file refuses becomes an abandon.
void JobController::DecideHookSwitchLocked(const v1::Job& job, LiveAttempt& attempt, bool commit,
                                           const std::string& reason,
                                           std::optional<v1::HookSwitch> proposal) {
  if (!proposal.has_value()) proposal = attempt.hook_switch.EndProposal();
  if (!proposal.has_value()) return;
  v1::HookSwitch decided = *proposal;
  std::string why = reason;
  if (commit) {
    decided.set_state(v1::HookSwitch::APPLIED);
    const std::string event =
        absl::StrCat("comm hook switched ", CommHookName(decided.old_hook()), " -> ",
                     CommHookName(decided.new_hook()), " at step ", decided.step(), " (switch ",
                     decided.version(), ", agreed by every rank)");
    const absl::Status written = jobs_
                                     ->RecordHookSwitch(job.id(), decided, event,
                                                        /*durable=*/true)
                                     .status();
    if (!written.ok()) {
      commit = false;
      why = absl::StrCat("the decision could not be written: ", written.message());
    }
  }
  if (!commit) {
    decided.set_state(v1::HookSwitch::ABANDONED);
    decided.set_reason(why);
    LogIfFailed(
        jobs_
            ->RecordHookSwitch(job.id(), decided,
                               absl::StrCat("comm hook switch ", decided.version(), " to ",
                                            CommHookName(decided.new_hook()), " abandoned: ", why,
                                            decided.proposed_again() ? "; proposed again" : ""))
            .status(),
        "recording a hook switch", JobContext(job));
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

}  // namespace shardwise
