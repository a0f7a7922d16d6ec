// Acting on the execution-order agreement's decisions (ExecutionOrderAgreement decides
// from the ranks' ORDER_RECORDED and ORDER_CHANGED reports): record the agreed order with
// its prefetch plan, fail the job on a disagreement, warn of a change, or send every rank
// a re-derived plan to adopt at one step.

#include "server/job_controller.h"

namespace shardwise {

void JobController::ApplyOrderDecisionLocked(const v1::Job& job, LiveAttempt& attempt,
                                             const ExecutionOrderAgreement::Decision& decision) {
  using Kind = ExecutionOrderAgreement::Decision::Kind;
  switch (decision.kind) {
    case Kind::kNone:
      return;
    case Kind::kFail:
      EndAttemptLocked(job);
      // Not re-queued: the same model runs in the same orders again.
      LogIfFailed(jobs_->Finish(job.id(), job.attempt(), v1::FAILED, decision.message).status(),
                  "failing job", JobContext(job));
      // After the write, as FailAttemptLocked's.
      AbortRanksLocked(job, decision.message, /*skip_worker=*/"");
      RequestScheduleLocked();
      return;
    case Kind::kWarn:
      RecordJobEvent(job, decision.message, "recording an order change");
      return;
    case Kind::kRecord: {
      auto recorded = jobs_->RecordExecutionPlan(job.id(), job.attempt(), decision.order,
                                                 decision.plan, decision.message);
      LogIfFailed(recorded.status(), "recording the execution order", JobContext(job));
      if (recorded.ok())
        ApplyOrderDecisionLocked(*recorded, attempt, attempt.order.Recorded(*recorded));
      return;
    }
    case Kind::kReplan: {
      auto recorded = jobs_->RecordExecutionPlan(job.id(), job.attempt(), decision.order,
                                                 decision.plan, decision.message);
      LogIfFailed(recorded.status(), "recording an order change", JobContext(job));
      if (!recorded.ok()) return;
      // Every rank adopts the new version at the same step (PlanUpdate explains how).
      v1::CoordinatorMessage message;
      v1::PlanUpdate* update = message.mutable_plan_update();
      update->set_job_id(job.id());
      update->set_attempt(job.attempt());
      *update->mutable_plan() = decision.plan;
      SendToRanksLocked(*recorded, message);
      return;
    }
  }
}

}  // namespace shardwise
