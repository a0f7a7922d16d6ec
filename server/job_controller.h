#ifndef SHARDWISE_SERVER_JOB_CONTROLLER_H_
#define SHARDWISE_SERVER_JOB_CONTROLLER_H_

// The lifecycle of jobs across workers: admits jobs, gang-schedules them onto idle
// workers, follows every rank's reports, and ends, re-queues or cancels an attempt when a
// rank finishes, fails or is lost. It is the only component that changes more than one
// manager, and it does so under one mutex, so the managers' own locks are always leaves
// and their states never disagree halfway through a decision.
//
// What it decides about one attempt beyond its lifecycle lives in classes of their own,
// each a pure function of what it is told and the time it is given: the execution-order
// agreement (execution_order_agreement.h), the hook-switch agreement
// (hook_switch_agreement.h) and stall detection (stall_detector.h).
//
// The heartbeat path never takes the controller's mutex: a heartbeat updates the worker
// registry and the stall detector (each under its own short lock) and, only when the
// worker went idle after an abort, posts the follow-up to Options::executor. Scheduling
// passes are coalesced there too: however many events ask for one, one runs.
//
// Thread-safety: all methods may be called from any thread.

#include <functional>
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
#include "common/clock.h"
#include "common/log.h"
#include "common/path_policy.h"
#include "contracts/job_spec_validation.h"
#include "contracts/memory_estimate.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"
#include "server/coordinator_metrics.h"
#include "server/execution_order_agreement.h"
#include "server/hook_switch_agreement.h"
#include "server/job_manager.h"
#include "server/rendezvous_store.h"
#include "server/serial_executor.h"
#include "server/stall_detector.h"
#include "server/timeline_store.h"
#include "server/worker_registry.h"

namespace shardwise {

class JobController {
 public:
  struct Options {
    JobLimits limits;
    bool check_paths = true;  // check that files named by specs exist, here
    // Where jobs may read and write (common/path_policy.h); every path of a spec is
    // checked against it at submission and again by the workers. None: not checked.
    std::optional<PathPolicy> path_policy;
    const Clock* clock = &Clock::Real();
    // Where coalesced scheduling passes and a heartbeat's follow-ups run; null: at once,
    // on the calling thread (tests and the fuzzer).
    SerialExecutor* executor = nullptr;
    CoordinatorMetrics* metrics = nullptr;  // null: nothing recorded
    absl::Duration heartbeat_interval = absl::Seconds(1);
    absl::Duration heartbeat_timeout = absl::Seconds(10);
    // A worker whose session has had a message waiting this long, none taken, is lost
    // (WorkerRegistry::Unread). Longer than the heartbeat timeout: a healthy daemon's
    // reader may wait seconds on an ending attempt or a probe before it reads on.
    absl::Duration unread_timeout = absl::Seconds(30);
    absl::Duration collective_timeout = absl::Seconds(60);
    // HookSwitchAgreement::Options: how far ahead a switch is proposed.
    absl::Duration hook_switch_lead = absl::Seconds(2);
    int64_t hook_switch_min_lead_steps = 3;
    // StallDetector::Options: a stall is reported after `stall_warning`; with
    // stall_abort > 0, a stall that long fails the attempt.
    absl::Duration stall_warning = absl::Seconds(60);
    absl::Duration stall_abort = absl::ZeroDuration();
    // After a restart, how long the ranks of the attempts the previous coordinator was
    // running have to re-attach (their workers register again naming the attempt);
    // attempts missing a rank then are re-queued.
    absl::Duration reattach_grace = absl::Seconds(30);
    // How long a worker whose rank never reached its attempt's rendezvous (within the
    // job's rendezvous.join_timeout_seconds) is kept out of scheduling.
    absl::Duration quarantine = absl::Minutes(10);
    // How long a rank's retryable failure (a connection error, say) is held before the
    // attempt is re-queued for it: a rank that fails for good (a bad token, a diverged
    // loss) takes its peers' collectives down with it, and their errors may reach the
    // coordinator before its own. A permanent failure reported within the grace decides
    // how the attempt ends. Zero: every failure decides at once.
    absl::Duration failure_report_grace = absl::Seconds(1);
    // How many of an ended attempt's spans the state file keeps (each rank its share,
    // the newest): memory holds up to 2^18 a job, about 12 MB serialised, which every
    // ended attempt would otherwise write, under the controller's lock, and keep for
    // the job's retention.
    size_t stored_timeline_spans = 32768;
  };

  // The managers are not owned and must outlive the controller. Jobs `jobs` holds as
  // RUNNING (a previous coordinator ran them) wait for their ranks to re-attach.
  JobController(JobManager* jobs, WorkerRegistry* workers, RendezvousStore* rendezvous,
                const Options& options);

  // Who submits a job: its principal (recorded with the job), and the folders its
  // tokens-file entry keeps its jobs to (server/client_auth.h), if any.
  struct Submitter {
    std::string name;
    PathPolicy::PrincipalPaths paths;
  };

  // Client operations. `submitter`: who submits; with folders of its own, the job's paths
  // must lie inside them too, and the job keeps them (Job.submitter_roots) for its workers.
  // `request_id`: the client's id for this submission (SubmitJobRequest.request_id); a
  // retry with the same one returns the job the first made. `abandoned`, where given, says
  // whether the client has gone (its call's deadline passed while the job was checked):
  // then no job is created, CANCELLED instead, so that a client that gave up finds no job
  // it was told failed.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec, const Submitter& submitter = {},
                                 const std::string& request_id = "",
                                 const std::function<bool()>& abandoned = nullptr);
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id);
  // Changes a running job's communication hook: picks a step no rank has reached and
  // proposes it to every rank; the switch applies once all accept (hook_schedule.h on the
  // worker). Returns the proposal. INVALID_ARGUMENT for a hook the job cannot use,
  // FAILED_PRECONDITION when the job is not running, already uses it, is agreeing
  // another switch, has too few steps left, or its ranks are re-attaching after a restart.
  absl::StatusOr<v1::HookSwitch> SetCommHook(const std::string& job_id, const v1::CommHook& hook);
  // JobService.ScaleJob (job_controller_heal.cc): the replica groups a running
  // fault-tolerant job trains with; the groups above `replicas` are asked to leave after
  // their step (the highest first), replacements join below it as idle workers allow.
  absl::StatusOr<v1::Job> Scale(const std::string& job_id, int32_t replicas);

  // Worker operations. RESOURCE_EXHAUSTED when the registry is full.
  absl::StatusOr<v1::RegisterWorkerResponse> RegisterWorker(
      const v1::RegisterWorkerRequest& request);
  // Makes `outbox` the worker's session. NOT_FOUND for an unregistered worker.
  absl::Status OpenSession(const std::string& worker_id,
                           const std::shared_ptr<SessionOutbox>& outbox);
  void CloseSession(const std::string& worker_id, const std::shared_ptr<SessionOutbox>& outbox);
  // The heartbeat path: see the file comment. `session`: the one it came on, whose
  // messages its read count counts (a stream already replaced counts none of the new
  // one's); null: the worker's current session.
  void OnHeartbeat(const std::string& worker_id, const v1::Heartbeat& heartbeat,
                   const SessionOutbox* session = nullptr);
  void OnReport(const std::string& worker_id, const v1::AttemptReport& report);
  void OnHookAck(const std::string& worker_id, const v1::HookChangeAck& ack);
  // A rank's answer to a DataPlaneProbe (job_controller_probes.cc).
  void OnProbeResult(const std::string& worker_id, const v1::DataPlaneProbeResult& result);

  // The spans the job's ranks sent: its latest attempt's, held in memory for recent jobs
  // and in the state file once an attempt ended. NOT_FOUND for an unknown job.
  absl::StatusOr<v1::Timeline> GetTimeline(const std::string& job_id) const;

  // Marks workers silent for longer than the heartbeat timeout as lost, and those that
  // read none of their session's messages for the unread timeout (WorkerRegistry::Unread), reports
  // (or aborts) stalled attempts, re-queues attempts whose ranks did not re-attach in time after a
  // restart, and forgets workers lost long ago. Called periodically.
  void CheckHeartbeats();

  // Starts every pending job that fits on idle workers now.
  void Schedule();

  // The coordinator is stopping (SIGTERM: a rolling update, an eviction): from now on a
  // closing session is the coordinator's doing, not the worker's, so no worker is lost
  // and no attempt fails or is re-queued for it. The ranks train on and re-attach to the
  // next coordinator, as after a crash; a graceful stop is never worse than one. A
  // registration or a session opened from now on is refused (UNAVAILABLE): taken, it
  // would lose the rank its worker still runs.
  void Stop();

 private:
  // A live attempt: its ranks' progress through it, and the agreements about it.
  struct LiveAttempt {
    LiveAttempt(int32_t attempt_number, int32_t world_size, bool order_recorded,
                const HookSwitchAgreement::Options& hook_options)
        : attempt(attempt_number), order(world_size, order_recorded), hook_switch(hook_options) {}

    int32_t attempt = 0;
    std::set<int32_t> joined;
    // Every rank must have joined by then (job_controller_joins.cc); InfiniteFuture for
    // an attempt a previous coordinator started.
    absl::Time join_deadline = absl::InfiniteFuture();
    std::set<int32_t> completed;
    bool led_completed = false;  // the rank that led at the end completed
    std::string result;          // and this was its final message
    ExecutionOrderAgreement order;
    HookSwitchAgreement hook_switch;
    // An attempt a previous coordinator ran, until every rank re-attached or the
    // deadline passed (job_controller_reattach.cc).
    bool awaiting_reattach = false;
    absl::Time reattach_deadline;
    std::set<int32_t> reattached;
    // Ranks of a replacement group placed on new workers that have not trained a step
    // yet (job_controller_heal.cc): the attempt may end without them.
    std::set<int32_t> joining;
    // The epochs whose first step was recorded, and the (rank, epoch) pairs whose state
    // transfer was (job_controller_heal.cc): each once.
    std::set<int32_t> epochs_started;
    std::set<std::pair<int32_t, int32_t>> transfers_recorded;
    // The longest step a rank reported (its checkpoint and evaluation in it): a
    // replacement waits for the live ranks' move that long, twice (JoinerWait).
    absl::Duration longest_step;
    // The data-plane probe the join deadline started (every rank reached the rendezvous,
    // some did not connect): the answers by prober rank, judged once every rank answered
    // or at the deadline (job_controller_probes.cc).
    absl::Time probe_deadline = absl::InfiniteFuture();
    std::map<int32_t, v1::DataPlaneProbeResult> probes;
    // The first retryable failure a rank reported, held until its deadline
    // (Options::failure_report_grace).
    struct HeldFailure {
      std::string reason;
      std::string worker;
      absl::Time deadline;
    };
    std::optional<HeldFailure> held_failure;
    // Ranks that found an input of the job missing on their hosts before they joined,
    // with what they said, until it is known whose fault that is
    // (job_controller_missing_inputs.cc): at the latest by the join deadline.
    struct MissingInput {
      std::string message;
      // A path the spec names (the job's for good where no rank finds it); not for the
      // job's own checkpoints (retried under the restart policy then).
      bool permanent = true;
    };
    std::map<int32_t, MissingInput> inputs_missing;
    // Fault-tolerant attempts: how often each worker's rank left (lost, or leaving by
    // itself), and until when it is not placed in the attempt again. A worker that leaves
    // again and again (a flapping node) would otherwise be healed back in after every
    // loss; the second time it is held off for kRejoinBackoff, doubling each time after.
    struct WorkerLeaves {
      int times = 0;
      absl::Time held_until = absl::InfinitePast();
    };
    std::map<std::string, WorkerLeaves> leaves_by_worker;
    // An event said the attempt is not healed for want of workers of its data-plane
    // version (said once until it heals again).
    bool heal_waits_for_version = false;
  };

  // Starts following a new live attempt of `job` (replacing an earlier one).
  LiveAttempt& StartLiveAttemptLocked(const v1::Job& job, bool order_recorded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // job_controller_reattach.cc: adopting the attempts a previous coordinator ran.
  // Every RUNNING job becomes a live attempt waiting for its ranks, with an event.
  void AwaitReattachments() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `running`, which worker `worker_id` says it runs as it registers, is a rank
  // of an attempt waiting for its ranks (or, `repeated`, one it re-attached already); if
  // so the worker is BUSY with it again.
  bool ReattachLocked(const std::string& worker_id, const v1::RunningAttempt& running,
                      bool repeated) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `request` repeats the worker's registration that re-attached the rank it held
  // `before` (RegisterWorker's previous record), with no session opened since.
  bool RepeatsReattachmentLocked(const std::string& worker_id, const v1::WorkerInfo& before,
                                 const v1::RegisterWorkerRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a leave of `worker`'s rank from `job`'s attempt, holding the worker off the
  // attempt's heals from its second leave on (LiveAttempt::WorkerLeaves), with an event.
  void CountWorkerLeaveLocked(const v1::Job& job, const std::string& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once every rank `attempt` still awaits has re-attached (those completed since count
  // as back), it waits no more and says so in an event.
  void EndReattachWaitIfAllBackLocked(const v1::Job& job, LiveAttempt& attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank of a fault-tolerant attempt is known lost while its ranks re-attach (`cause`:
  // a re-attached rank's collective failed on a peer, or a rank's worker came back
  // without it): the ranks still missing have the peer timeout to come back, not the
  // whole grace, and those that do not leave with their groups then.
  void DecideReattachSoonerLocked(const v1::Job& job, LiveAttempt& attempt,
                                  const std::string& cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnPeerLostWhileReattaching(const std::string& job_id, int32_t attempt);
  // A worker holding a rank of a waiting attempt registered without it (its daemon
  // restarted): a fault-tolerant attempt goes on without that rank's group
  // (DecideReattachSoonerLocked); any other cannot go on and is re-queued.
  void OnRankBackWithoutAttemptLocked(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once its session is open: what the worker missed while the coordinator was down
  // (hook-switch decisions, the newest prefetch plan).
  void ResyncReattachedLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-queues waiting attempts past their deadline.
  void CheckReattachDeadlinesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends an attempt that failed for no fault of the job (ranks that did not re-attach,
  // a worker that never joined): aborts its ranks and re-queues the job as a new attempt
  // without counting a restart.
  void RequeueWithoutRestartLocked(const v1::Job& job, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // job_controller_joins.cc: the rendezvous join deadline, once per attempt. Ranks that
  // never reached the rendezvous while others did are blamed and their workers
  // quarantined, and the job re-queued without a restart; if no rank reached it, the
  // attempt fails; if every rank reached it, an event says which have not connected and
  // the data plane is probed (below). A scheduling pass follows each quarantine's end.
  void CheckJoinDeadlinesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EndLateJoinLocked(const v1::Job& job, const std::set<int32_t>& joined,
                         const std::vector<int32_t>& never_reached, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The quarantines the state file holds (a restart keeps them), back in the registry.
  void RestoreQuarantinesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps the worker out of scheduling until the quarantine ends, and a pass then.
  void HoldQuarantineLocked(const StoredQuarantine& quarantine) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Quarantines the workers of `ranks`, which `what` ("did not reach the rendezvous
  // within 30 s ..."), and re-queues the job without counting a restart.
  void QuarantineLocked(const v1::Job& job, const std::vector<int32_t>& ranks,
                        const std::string& what, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Only the quarantines (unless quarantining is off), with a warning: the reason it
  // returns, which names the ranks and their workers.
  std::string QuarantineWorkersLocked(const v1::Job& job, const std::vector<int32_t>& ranks,
                                      const std::string& what, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // job_controller_missing_inputs.cc: a rank whose host lacks an input of the job
  // (AttemptReport.inputs_missing). Before the attempt ran, decided (missing_inputs.h)
  // once every rank reported it or reached the rendezvous, or at the join deadline: the
  // reporting ranks' hosts are quarantined and the job placed again, its restarts
  // untouched, or the job fails for good; a replacement's is its host's at once.
  void OnInputsMissingLocked(const v1::Job& job, LiveAttempt& attempt,
                             const v1::AttemptReport& report, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckMissingInputsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DecideMissingInputsLocked(const v1::Job& job, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // job_controller_probes.cc: whose data plane is at fault when every rank reached the
  // rendezvous but some did not connect. Asks each rank's worker to probe its peers
  // (false when a worker has no probe listener, an older one); the answers are judged
  // (server/data_plane_blame.h) once all came or at the probe deadline: the ranks no
  // other rank reached are quarantined as those that never reached the rendezvous are.
  bool ProbeDataPlaneLocked(const v1::Job& job, LiveAttempt& live, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckProbeDeadlinesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each rank's host, from its worker's probe address ("" where unknown).
  std::vector<std::string> RankHostsLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JudgeProbesLocked(const v1::Job& job, LiveAttempt& live, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Records the stalls the detector finds as events; fails the attempts past the abort.
  void HandleStallsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Carries out what the execution-order agreement decided.
  void ApplyOrderDecisionLocked(const v1::Job& job, LiveAttempt& attempt,
                                const ExecutionOrderAgreement::Decision& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker whose heartbeat says it is idle again after an abort.
  void ReturnToIdle(const std::string& worker_id);

  // Records and sends a proposal to switch `job` to `hook` at a step after both the
  // reported progress and `not_before`.
  absl::StatusOr<v1::HookSwitch> ProposeHookSwitchLocked(const v1::Job& job, LiveAttempt& attempt,
                                                         const v1::CommHook& hook,
                                                         int64_t not_before,
                                                         absl::Time request_time)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends `proposal` (by default the attempt's outstanding one), writes it APPLIED
  // (commit) or ABANDONED with `reason`, and tells the ranks.
  void DecideHookSwitchLocked(const v1::Job& job, LiveAttempt& attempt, bool commit,
                              const std::string& reason,
                              std::optional<v1::HookSwitch> proposal = std::nullopt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a fault-tolerant job's membership changed: a hook switch being agreed is sent
  // to `joiners` (workers of a replacement group) and commits if every live rank has now
  // accepted it.
  void ReconsiderHookSwitchLocked(const v1::Job& job, const std::vector<std::string>& joiners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendToRanksLocked(const v1::Job& job, const v1::CoordinatorMessage& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static v1::CoordinatorMessage HookChangeMessage(const v1::Job& job,
                                                  const v1::HookSwitch& proposal);
  static v1::CoordinatorMessage HookDecisionMessage(const v1::Job& job, int32_t version,
                                                    bool commit);
  static v1::CoordinatorMessage AbortMessage(const std::string& job_id, int32_t attempt,
                                             const std::string& reason);
  // Logs a failed `status` as an error: what the coordinator was doing, about `context`.
  static void LogIfFailed(const absl::Status& status, const char* what,
                          const LogContext& context = LogContext());
  // The log context of `job`'s current attempt, for LogIfFailed.
  static LogContext JobContext(const v1::Job& job);
  // Adds `text` to the events of `job`'s current attempt; a failure to record it is
  // logged (as `what`), never returned: an event is a report, and the decision it reports
  // has already been made.
  void RecordJobEvent(const v1::Job& job, const std::string& text, const char* what) const;

  // Asks for a scheduling pass: on the executor, once however often it is asked before
  // it runs; at once without an executor.
  void RequestScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Places pending jobs on idle workers, then replacement groups with what they leave.
  void ScheduleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PlacePendingJobsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before a placement is written (a pending job's attempt, a heal's group): the ranks
  // completed since the last flush, recorded in memory only (JobManager::RecordCompletion),
  // are written first. A crash after the placement is written would otherwise leave a
  // state file whose job waits for a rank from a worker now running another.
  void WriteCompletionsBeforePlacingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // UNAVAILABLE once Stop() was called: registrations and sessions wait for the next
  // coordinator.
  absl::Status RefuseWhileStoppingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartAttemptLocked(const std::string& job_id, const std::vector<std::string>& worker_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks every path of `spec` against the roots (the coordinator's, and the submitter's
  // where its entry has some) and makes it canonical; returns the submitter's roots to
  // keep with the job (empty without).
  absl::StatusOr<v1::SubmitterRoots> CheckPaths(const Submitter& submitter,
                                                v1::JobSpec* spec) const;
  // `kind` names how the loss was detected, for the metrics; null for a planned stop (the
  // worker said it was shutting down), which is no failure.
  void LoseWorkerLocked(const std::string& worker_id, const std::string& reason, const char* kind)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rank its worker held, lost with it (`reason`): a rank of a SCHEDULED attempt that
  // had not joined has the job re-queued without a restart, its worker quarantined
  // (QuarantineLocked) unless the worker stopped as told (`planned_stop`: a rollout's
  // pod, whose refusal of the assignment may not have reached us); any other is lost as
  // LoseRankLocked says.
  void LoseWorkersRankLocked(const v1::Job& job, int32_t rank, const std::string& reason,
                             const std::string& worker_id, bool planned_stop)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells every rank of the attempt to stop, except `skip_worker` (already gone).
  void AbortRanksLocked(const v1::Job& job, const std::string& reason,
                        const std::string& skip_worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `worker_id` runs `job`'s current attempt (the registry says so).
  bool RunsAttemptLocked(const std::string& worker_id, const v1::Job& job) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // job_controller_membership.cc: fault-tolerant attempts (spec.fault_tolerance). Whether
  // the loss of `lost_rank` (`reason`) left the attempt training without its replica group:
  // the new membership written, the group's other ranks told to stop (unless `graceful`:
  // the group leaves by itself after its step; if not, the ranks that left lose their
  // rendezvous tokens), the live ranks told the new epoch. False: the caller fails the
  // attempt as without fault tolerance.
  bool LeaveIfTolerantLocked(const v1::Job& job, int32_t lost_rank, const std::string& reason,
                             const std::string& lost_worker, bool graceful)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranks of the job's current attempt that still train, ascending (every rank unless
  // some left); the first leads (its progress and result are the job's).
  static std::vector<int32_t> LiveRanksOf(const v1::Job& job);
  // The rank whose progress is the job's: the first live rank that has trained in the
  // attempt (a replacement not yet stepping holds the newest membership's first place
  // before it has any progress to tell).
  static int32_t SpeakerOf(const v1::Job& job, const LiveAttempt& attempt);
  // The job's current membership, for its live ranks.
  static v1::CoordinatorMessage MembershipChangeMessage(const v1::Job& job);
  // Once `job`'s new membership is written: the rendezvous keys of epochs before the one
  // it replaces are dropped (the last one's stay for ranks still moving on from it).
  void DropOldEpochKeys(const v1::Job& job);
  // The Assignment of `rank` of the job's current attempt, with its rendezvous token.
  v1::CoordinatorMessage AssignmentMessage(const v1::Job& job, int32_t rank,
                                           const std::string& token) const;
  // job_controller_heal.cc: places, on idle workers, the replica groups each
  // fault-tolerant attempt lacks against its target (those that left, under
  // fault_tolerance.heal; those a job scaled past its initial size has not placed yet),
  // the lowest first, all a pass can place in one epoch.
  void HealDegradedAttemptsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the ranks of the live groups above the job's target_replicas (the highest) to
  // leave after their step: when the job is scaled, when a new attempt of a job scaled
  // down runs (it places world_size ranks), and of each re-attached worker after a
  // coordinator restart (a request sent before may have been lost with it).
  void AskGroupsAboveTargetToLeaveLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranks of the live groups above the job's target_replicas, ascending (none when the
  // job is at or below it).
  static std::vector<int32_t> RanksAboveTarget(const v1::Job& job);
  // The request that those ranks leave, saying why.
  static v1::CoordinatorMessage LeaveMessage(const v1::Job& job);
  // The data-plane version of the workers `job`'s live ranks run on (nullopt when none is
  // registered): the ranks added to them must share it (contracts/data_plane_version.h).
  std::optional<int32_t> LiveDataPlaneVersion(const v1::Job& job) const;
  // A degraded attempt that no idle worker of its `version` can heal: when a group's
  // worth of idle workers of one other version would take it but for that version
  // (`of_other_versions`: how many of each), an event says so, once until it heals.
  void SayHealWaitsForVersionLocked(const v1::Job& job, int32_t version,
                                    const std::map<int32_t, int>& of_other_versions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `job`'s ranks `group` (one or more whole replica groups) were placed on
  // `workers` (in the ranks' order) and told, with the live ranks, to join the next epoch.
  bool HealLocked(const v1::Job& job, const std::vector<int32_t>& group,
                  const std::vector<std::string>& workers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The leader's EPOCH_STARTED: the epoch's first step, into the job's history; once per
  // epoch of the attempt's memberships (a repeated report writes nothing).
  void RecordEpochStartedLocked(const v1::Job& job, LiveAttempt& attempt,
                                const v1::AttemptReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank's STATE_RECEIVED: an event naming the donor -> receiver pair, the bytes, the
  // rate and the state's checksum; once per rank and epoch of the attempt's memberships
  // (each is a state-file write and an event kept for good).
  void RecordStateReceivedLocked(const v1::Job& job, LiveAttempt& attempt,
                                 const v1::AttemptReport& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // job_controller_reattach.cc: at the re-attach deadline, a fault-tolerant attempt's
  // ranks that never came back leave as lost ranks would (`reason`), if enough replicas
  // are left; false (nothing done) otherwise.
  bool LeaveWithoutMissingRanksLocked(const v1::Job& job, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank that asks to leave with its group (its worker shutting down: LEAVING): the
  // group leaves after its step if the attempt can train on without it (nothing redone),
  // else the attempt fails as without fault tolerance.
  void LeaveLocked(const v1::Job& job, int32_t rank, const std::string& reason,
                   const std::string& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank reported that it failed (an ABORTED report): a permanent failure, or any in a
  // fault-tolerant job, is handled at once (LoseRankLocked); the first retryable one of an
  // attempt is held for Options::failure_report_grace, and decides once that passes with
  // no permanent failure reported (CheckHeldFailuresLocked).
  void OnRankFailedLocked(const v1::Job& job, LiveAttempt& attempt, const v1::AttemptReport& report,
                          const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckHeldFailuresLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A loss the attempt takes (LeaveIfTolerantLocked), else FailAttemptLocked.
  void LoseRankLocked(const v1::Job& job, int32_t rank, const std::string& reason,
                      const std::string& lost_worker, bool retryable = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A rank's COMPLETED: its worker is idle, the leader's result kept, and the attempt ends
  // once every live rank has completed.
  // A rank's ABORTED report: its failure, or (its worker shutting down before the attempt
  // trained, or still running another attempt) a re-queue that counts no restart.
  // A worker that refused its assignment as still running another attempt: the job is
  // placed again, and the worker, once its heartbeats say it runs nothing, may take one.
  // A worker that refuses kBusyRefusalsBeforeQuarantine in a row says it is busy while its
  // heartbeats say it is idle: it is quarantined, as a worker that never joins is, where
  // it would otherwise be given the job again and again, each time a new attempt.
  static constexpr int kBusyRefusalsBeforeQuarantine = 3;
  void OnRankRefusedAsBusyLocked(const v1::Job& job, const v1::AttemptReport& report,
                                 const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The progress a rank reports: the speaker's is the job's; any rank's checkpoint steps
  // are kept.
  void OnRankProgressLocked(const v1::Job& job, LiveAttempt& attempt,
                            const v1::AttemptReport& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankAbortedLocked(const v1::Job& job, LiveAttempt& attempt,
                           const v1::AttemptReport& report, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRankCompletedLocked(const v1::Job& job, LiveAttempt& attempt,
                             const v1::AttemptReport& report, const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the attempt with SUCCEEDED when every live rank has completed.
  void FinishIfCompletedLocked(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  const Clock& clock_;
  const HookSwitchAgreement::Options hook_switch_options_;

  TimelineStore timelines_;  // its own lock, a leaf like the managers'
  StallDetector stalls_;     // its own lock: fed by the heartbeat path
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, LiveAttempt> live_ ABSL_GUARDED_BY(mu_);
  // Workers re-attached whose session has not opened yet (ResyncReattachedLocked).
  std::set<std::string> to_resync_ ABSL_GUARDED_BY(mu_);
  bool schedule_posted_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::multiset<absl::Time> quarantine_ends_ ABSL_GUARDED_BY(mu_);
  // Per worker, the assignments it refused in a row as still running another attempt
  // (OnRankRefusedAsBusyLocked); any other report of one of its ranks clears its count, as
  // does its loss or a registration (a restarted daemon).
  absl::flat_hash_map<std::string, int> busy_refusals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_CONTROLLER_H_
