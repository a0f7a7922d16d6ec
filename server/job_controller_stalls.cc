// Acting on the stall detector's findings (StallDetector decides from the positions the
// heartbeats carry): a stall is logged and recorded as an event, or, past the abort
// timeout, fails the attempt.

#include <cstdio>

#include "server/job_controller.h"

namespace shardwise {

void JobController::HandleStallsLocked(absl::Time now) {
  for (const StallDetector::Stall& stall : stalls_.Check(now)) {
    auto job = jobs_->Current(stall.job_id);
    if (!job.ok() || job->state() != v1::RUNNING || job->attempt() != stall.attempt) continue;
    if (options_.metrics != nullptr) {
      options_.metrics->stalls_total.With({stall.abort ? "aborted" : "reported"}).Increment();
    }
    if (stall.abort) {
      FailAttemptLocked(*job, stall.message, /*lost_worker=*/"");
      continue;
    }
    LogWarning(LogContext().Job(stall.job_id).Attempt(stall.attempt), stall.message);
    LogIfFailed(jobs_->RecordEvent(stall.job_id, stall.attempt, stall.message).status(),
                "recording a stall", LogContext().Job(stall.job_id).Attempt(stall.attempt));
  }
}

}  // namespace shardwise
