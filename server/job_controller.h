#ifndef SHARDWISE_SERVER_JOB_CONTROLLER_H_
#define SHARDWISE_SERVER_JOB_CONTROLLER_H_

// The lifecycle of jobs across workers: validates and admits jobs, gang-schedules them
// onto idle workers, follows every rank's reports, and ends, re-queues or cancels an
// attempt when a rank finishes, fails or is lost. It is the only component that changes
// more than one manager, and it does so under one mutex, so the managers' own locks are
// always leaves and their states never disagree halfway through a decision.
//
// Thread-safety: all methods may be called from any thread.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/job_spec_validation.h"
#include "common/memory_estimate.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "server/job_manager.h"
#include "server/rendezvous_store.h"
#include "server/timeline_store.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobController {
 public:
  struct Options {
    JobLimits limits;
    bool check_paths = true;  // check that files named by specs exist, here
    absl::Duration heartbeat_interval = absl::Seconds(1);
    absl::Duration heartbeat_timeout = absl::Seconds(10);
    absl::Duration collective_timeout = absl::Seconds(60);
    // A hook switch is proposed for the step the job should reach this long after its
    // latest progress report (at its reported speed), and at least this many steps
    // ahead: room for the proposal to reach every rank before any gets there.
    absl::Duration hook_switch_lead = absl::Seconds(2);
    int64_t hook_switch_min_lead_steps = 3;
    // Ranks waiting in a collective for longer than this for ranks that have not entered
    // it are a stall: an event names both. With stall_abort > 0, a stall that long fails
    // the attempt with that reason.
    absl::Duration stall_warning = absl::Seconds(60);
    absl::Duration stall_abort = absl::ZeroDuration();
    // After a restart, how long the ranks of the attempts the previous coordinator was
    // running have to re-attach (their workers register again naming the attempt);
    // attempts missing a rank then are re-queued.
    absl::Duration reattach_grace = absl::Seconds(30);
  };

  // The managers are not owned and must outlive the controller. Jobs `jobs` holds as
  // RUNNING (a previous coordinator ran them) wait for their ranks to re-attach.
  JobController(JobManager* jobs, WorkerRegistry* workers, RendezvousStore* rendezvous,
                const Options& options);

  // Client operations.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec);
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // Changes a running job's communication hook: picks a step no rank has reached and
  // proposes it to every rank; the switch applies once all accept (hook_schedule.h on the
  // worker). Returns the proposal. INVALID_ARGUMENT for a hook the job cannot use,
  // FAILED_PRECONDITION when the job is not running, already uses it, is agreeing
  // another switch, has too few steps left, or its ranks are re-attaching after a restart.
  absl::StatusOr<v1::HookSwitch> SetCommHook(const std::string& job_id, const v1::CommHook& hook);

  // Worker operations.
  v1::RegisterWorkerResponse RegisterWorker(const v1::RegisterWorkerRequest& request);
  absl::StatusOr<std::shared_ptr<SessionOutbox>> OpenSession(const std::string& worker_id);
  void CloseSession(const std::string& worker_id, const std::shared_ptr<SessionOutbox>& outbox);
  void OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& heartbeat);
  void OnReport(const std::string& worker_id, const v1::AttemptReport& report);
  void OnHookAck(const std::string& worker_id, const v1::HookChangeAck& ack);

  // The spans the job's ranks sent (TimelineStore); NOT_FOUND for an unknown job.
  absl::StatusOr<v1::Timeline> GetTimeline(const std::string& job_id) const;

  // Marks workers silent for longer than the heartbeat timeout as lost, reports (or
  // aborts) stalled attempts, and re-queues attempts whose ranks did not re-attach in
  // time after a restart. Called periodically by the coordinator.
  void CheckHeartbeats();

  // Starts every pending job that fits on idle workers now.
  void Schedule();

 private:
  // Ranks of a live attempt that have joined the data plane and finished their work.
  struct LiveAttempt {
    int32_t attempt = 0;
    std::set<int32_t> joined;
    std::set<int32_t> completed;
    std::string result;  // rank 0's final message
    // The hook switch being agreed, if any, and the ranks that accepted it.
    std::optional<v1::HookSwitch> proposal;
    std::set<int32_t> accepted;
    int proposals_tried = 0;  // for this request: a rank already past the step re-proposes
    // Each rank's first-iteration execution order, until all have reported.
    std::map<int32_t, v1::ExecutionOrder> orders;
    bool order_recorded = false;  // every rank's first order arrived, and they agree
    bool order_change_warned = false;
    // A change reported before every rank's first order arrived, handled after them.
    std::optional<v1::AttemptReport> early_change;
    // Each rank's latest position (from its heartbeat), when it arrived, and when the
    // rank last moved (its step, phase, unit or collective changed).
    struct Seen {
      v1::RankPosition position;
      absl::Time received;
      absl::Time moved;
    };
    std::map<int32_t, Seen> positions;
    int64_t stall_reported_at = -1;  // the collective (by count) last reported as stalled
    // An attempt a previous coordinator ran, until every rank re-attached or the
    // deadline passed (job_controller_reattach.cc).
    bool awaiting_reattach = false;
    absl::Time reattach_deadline;
    std::set<int32_t> reattached;
  };

  // job_controller_reattach.cc: adopting the attempts a previous coordinator ran.
  // Every RUNNING job becomes a live attempt waiting for its ranks, with an event.
  void AwaitReattachments() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `running`, which worker `worker_id` says it runs as it registers, is a rank
  // of an attempt waiting for its ranks; if so the worker is BUSY with it again.
  bool ReattachLocked(const std::string& worker_id, const v1::RunningAttempt& running)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker holding a rank of a waiting attempt registered without it (its daemon
  // restarted): the attempt cannot go on.
  void RequeueIfRankCameBackWithoutItLocked(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once its session is open: what the worker missed while the coordinator was down
  // (hook-switch decisions, the newest prefetch plan).
  void ResyncReattachedLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-queues waiting attempts past their deadline.
  void CheckReattachDeadlinesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a waiting attempt: aborts the ranks that came back, re-queues the job as a new
  // attempt without counting a restart (the job did nothing wrong).
  void RequeueUnattachedLocked(const v1::Job& job, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Names the ranks that keep others waiting in a collective, as an event once per
  // stalled collective, and fails the attempt past options_.stall_abort.
  void CheckStallsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void OnExecutionOrderLocked(const v1::Job& job, LiveAttempt& attempt,
                              const v1::AttemptReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Records and sends a proposal to switch `job` to `hook` at a step after both the
  // reported progress and `not_before`.
  absl::StatusOr<v1::HookSwitch> ProposeHookSwitchLocked(const v1::Job& job,
                                                         LiveAttempt& attempt,
                                                         const v1::CommHook& hook,
                                                         int64_t not_before,
                                                         int64_t request_time_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the attempt's proposal: APPLIED (commit) or ABANDONED with `reason`.
  void DecideHookSwitchLocked(const v1::Job& job, LiveAttempt& attempt, bool commit,
                              const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendToRanksLocked(const v1::Job& job, const v1::CoordinatorMessage& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static v1::CoordinatorMessage HookDecisionMessage(const v1::Job& job, int32_t version,
                                                    bool commit);
  // "rank 1 (worker w1)".
  static std::string RankName(const v1::Job& job, int32_t rank);
  static void LogError(const absl::Status& status, const char* what);

  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION when workers of `device` are registered and none advertises
  // `memory` per rank; OK when one does, or none is registered yet (the job waits).
  absl::Status CheckSomeWorkerHasMemory(v1::DeviceKind device, const MemoryEstimate& memory) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseWorkerLocked(const std::string& worker_id, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells every rank of the attempt to stop, except `skip_worker` (already gone).
  void AbortRanksLocked(const v1::Job& job, const std::string& reason,
                        const std::string& skip_worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An attempt failed: re-queue the job if it is `retryable` and its restart policy
  // allows, else fail it.
  void FailAttemptLocked(const v1::Job& job, const std::string& reason,
                         const std::string& lost_worker, bool retryable = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndAttemptLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  RendezvousStore* const rendezvous_;
  const Options options_;

  TimelineStore timelines_;  // its own lock, a leaf like the managers'
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, LiveAttempt> live_ ABSL_GUARDED_BY(mu_);
  // Workers re-attached whose session has not opened yet (ResyncReattachedLocked).
  std::set<std::string> to_resync_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_CONTROLLER_H_
