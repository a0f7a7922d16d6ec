#ifndef SHARDWISE_SERVER_JOB_MANAGER_H_
#define SHARDWISE_SERVER_JOB_MANAGER_H_

// Owns the jobs: their lifecycle state machine, persistence through the StateStore, and
// change notification for watchers. It knows nothing of workers; the JobController drives
// it. A change is written to the store before it becomes visible in memory, so what a
// client has seen survives a crash.
//
// Memory stays bounded per job: a live job (PENDING, SCHEDULED, RUNNING) is held whole;
// one that ended is held as its summary, and Get reads the rest from the state file;
// one that ended long ago may be forgotten altogether (Forget).
// Progress, which changes every step, is written by FlushProgress (all jobs in one
// transaction, every second) rather than on every report.
//
// A change the store cannot write (a full disk, an I/O error) is not lost: it stands for
// the controller (later changes build on it) and waits, unseen by clients, while
// RetryUnsavedChanges writes it; the coordinator reports NOT_SERVING until none is left.
// Only a new submission is refused instead (UNAVAILABLE: the client may retry).
//
// Thread-safety: all methods may be called from any thread. The manager's lock is held
// across state-file commits; nothing on the heartbeat path takes it.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/monotonic_wait.h"
#include "contracts/job_state.h"
#include "proto/job.pb.h"
#include "server/scheduler.h"
#include "server/state_store.h"

namespace shardwise {

// The fingerprint of a spec as a client sent it: SHA-256 (hex) of its deterministic
// serialization. A retried submission (the same request_id) is recognised by it.
std::string SubmittedSpecSha256(const v1::JobSpec& spec);

class JobManager {
 public:
  struct Options {
    const Clock* clock = &Clock::Real();
    // List reads at most this many jobs a call, so that a filter few jobs match holds the
    // lock every update takes only briefly: its page may then be short, even empty, with
    // a token to go on from.
    size_t list_scan_limit = 20000;
  };

  // Loads every job from `store` (not owned; must outlive the manager). Jobs the previous
  // coordinator had SCHEDULED are re-queued as PENDING with a new attempt to come, and an
  // event that says why; RUNNING ones stay RUNNING for their ranks to re-attach
  // (JobController); hook switches still being agreed are abandoned.
  static absl::StatusOr<std::unique_ptr<JobManager>> Create(StateStore* store,
                                                            const Options& options);

  // Stores a new PENDING job. `spec` must already be validated, with defaults applied;
  // `memory_per_rank` is its estimate (contracts/memory_estimate.h); `submitter` who sent it,
  // `submitter_roots` the folders that principal's jobs are kept to (empty: none of its own).
  // With a `request_id` the submitter used before (a retried submission, also across
  // restarts), returns the job that submission made instead; ALREADY_EXISTS when that job
  // has another spec. `submitted_spec_sha256`: the fingerprint of the spec as the client
  // sent it (SubmittedSpecSha256), kept to recognise a retry by.
  absl::StatusOr<v1::Job> Submit(const v1::JobSpec& spec,
                                 const v1::MemoryEstimate& memory_per_rank = {},
                                 const std::string& submitter = "",
                                 const std::string& request_id = "",
                                 const v1::SubmitterRoots& submitter_roots = {},
                                 const std::string& submitted_spec_sha256 = "");
  // The job an earlier submission by `submitter` with `request_id` made, if it kept the
  // fingerprint of the spec it was sent: that job when `submitted_spec_sha256` matches,
  // ALREADY_EXISTS when not. nullopt when no such job, or one without a fingerprint (its
  // spec is compared by Submit, once the new one is checked).
  absl::StatusOr<std::optional<v1::Job>> FindSubmission(
      const std::string& submitter, const std::string& request_id,
      const std::string& submitted_spec_sha256) const;

  // The job, whole, as written (what clients see); NOT_FOUND. A job that ended is read
  // from the state file.
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  // The same, with the version the job is at (see ChangedJobs).
  absl::StatusOr<v1::Job> Get(const std::string& job_id, uint64_t* version) const;
  // The job as it stands for the controller: with a change the store has not taken yet
  // (its decisions build on it, as later changes do); otherwise as Get.
  absl::StatusOr<v1::Job> Current(const std::string& job_id) const;

  struct ListFilter {
    std::vector<v1::JobState> states;  // empty: any
    std::string submitter;             // empty: anyone's
  };
  struct Page {
    std::vector<v1::JobSummary> jobs;
    std::string next_page_token;  // empty on the last page
  };
  // Summaries, oldest first, after `page_token` (empty: from the first); at most
  // `page_size`, of at most Options::list_scan_limit jobs read (a page short of
  // `page_size` with a next_page_token is not the last). INVALID_ARGUMENT for a token
  // this manager did not hand out.
  absl::StatusOr<Page> List(const ListFilter& filter, const std::string& page_token,
                            size_t page_size) const;
  // Every live job, whole, oldest first.
  std::vector<v1::Job> Live() const;
  // How many jobs are in each state (for the metrics).
  std::map<v1::JobState, int64_t> CountByState() const;

  // The timeline of a job's attempt that ended, kept in the state file; NOT_FOUND when
  // none was kept.
  absl::Status SaveTimeline(const v1::Timeline& timeline);
  absl::StatusOr<v1::Timeline> LoadTimeline(const std::string& job_id) const;
  // Workers' quarantines, kept in the state file beside the jobs (StateStore).
  absl::Status SaveQuarantine(const StoredQuarantine& quarantine);
  absl::StatusOr<std::vector<StoredQuarantine>> LoadQuarantines() const;
  // Deletes the quarantines that have ended from the state file.
  absl::Status ForgetEndedQuarantines();
  // The PENDING jobs as the scheduler sees them (with changes the store has not taken
  // yet), oldest first.
  std::vector<PendingJob> PendingJobs() const;
  // Says why a PENDING job waits: in memory only (it is derived from the cluster and
  // rewritten as it changes), no event; a no-op when the job is not pending.
  void SetPendingReason(const std::string& job_id, const std::string& reason);

  // The lifecycle. Each checks the job's current state (FAILED_PRECONDITION otherwise)
  // and, where given, that `attempt` is the job's current one, so a late report from an
  // earlier attempt cannot touch a newer one.
  static constexpr int32_t kAnyAttempt = -1;
  // PENDING -> SCHEDULED with the next attempt number and these ranks.
  absl::StatusOr<v1::Job> Schedule(const std::string& job_id,
                                   const std::vector<v1::RankAssignment>& ranks);
  // SCHEDULED -> RUNNING.
  absl::StatusOr<v1::Job> MarkRunning(const std::string& job_id, int32_t attempt);
  // Any live state -> SUCCEEDED, FAILED or CANCELLED, with the reason (and result); a
  // comm hook switch still PROPOSED is ABANDONED in the same write.
  absl::StatusOr<v1::Job> Finish(const std::string& job_id, int32_t attempt,
                                 v1::JobState final_state, const std::string& reason,
                                 const std::string& result = "");
  // Any live state -> CANCELLED, a client's request: written before it returns, or
  // UNAVAILABLE with nothing changed (the client asks again), since the caller stops the
  // job's ranks only once the cancellation is sure to outlive a coordinator restart.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id, const std::string& reason);
  // SCHEDULED or RUNNING -> PENDING, to be scheduled again as a new attempt.
  absl::StatusOr<v1::Job> Requeue(const std::string& job_id, int32_t attempt,
                                  const std::string& reason, bool counts_as_restart);
  // Shown at once; written by the next FlushProgress (or with the job's next change).
  absl::Status UpdateProgress(const std::string& job_id, int32_t attempt,
                              const v1::Progress& progress);
  // Job.checkpoint_step from any rank's progress (the speaker may be a replacement that
  // knows of no checkpoint): kept when newer, as progress is written.
  absl::Status RecordCheckpointStep(const std::string& job_id, int32_t attempt, int64_t step);

  // Records that `rank` of `attempt` completed, and when it `led` (wrote the job's
  // outputs) the job's `result`, so that a restarted coordinator does not wait for it
  // (Job.completion). The leader's is written at once (kept for a retry where the file
  // refuses it); the others' as progress is: by the next FlushProgress, or with the job's
  // next change.
  absl::Status RecordCompletion(const std::string& job_id, int32_t attempt, int32_t rank, bool led,
                                const std::string& result);

  // Records the step of init.checkpoint_dir's checkpoint the job first started from
  // (Job.init_checkpoint_step), with an event; written at once. A job that has one keeps
  // it (FAILED_PRECONDITION).
  absl::StatusOr<v1::Job> RecordInitCheckpoint(const std::string& job_id, int32_t attempt,
                                               int64_t step);

  // Appends an event to a live job of `attempt` (nothing else changes).
  absl::StatusOr<v1::Job> RecordEvent(const std::string& job_id, int32_t attempt,
                                      const std::string& event_message);

  // Stores the execution order the ranks of `attempt` agree on and the prefetch plan
  // derived from it, with an event.
  absl::StatusOr<v1::Job> RecordExecutionPlan(const std::string& job_id, int32_t attempt,
                                              const v1::ExecutionOrder& order,
                                              const v1::PrefetchPlan& plan,
                                              const std::string& event_message);

  // Adds a communication-hook switch to a live job, or replaces the one of the same
  // version (its state changed), with an event saying what happened. `durable`: only
  // once written (UNAVAILABLE, changing nothing, if the state file refuses it), for a
  // decision that must survive a crash before the ranks hear it.
  absl::StatusOr<v1::Job> RecordHookSwitch(const std::string& job_id,
                                           const v1::HookSwitch& hook_switch,
                                           const std::string& event_message, bool durable = false);

  // Stores a fault-tolerant attempt's new membership, with an event, once written
  // (UNAVAILABLE, changing nothing, if the state file refuses it): the ranks hear of it
  // only after, so a coordinator restarted at any point agrees with them. `reassigned`:
  // ranks that rejoin on other workers (a replacement group), by rank.
  absl::StatusOr<v1::Job> RecordMembership(const std::string& job_id,
                                           const v1::Membership& membership,
                                           const std::string& event_message,
                                           const std::vector<v1::RankAssignment>& reassigned = {});

  // Records the first step membership `epoch` of `attempt` trained (its history entry's
  // first_step), as its leader reported it; the first report stands. ALREADY_EXISTS,
  // writing nothing, for an epoch whose first step is recorded or that the history lacks
  // (one a restarted coordinator never recorded).
  absl::StatusOr<v1::Job> RecordEpochStart(const std::string& job_id, int32_t attempt,
                                           int32_t epoch, int64_t step);

  // Stores a fault-tolerant job's target replica groups (Job.target_replicas), with an
  // event, once written (UNAVAILABLE, changing nothing, if the state file refuses it).
  absl::StatusOr<v1::Job> SetTargetReplicas(const std::string& job_id, int32_t replicas,
                                            const std::string& event_message);

  // Writes the changes the store refused earlier; how many are still unwritten, and the
  // latest store error if any.
  int RetryUnsavedChanges(absl::Status* last_error = nullptr);
  // One line for each change still unwritten: the job, the state it has now and the
  // one the state file holds, since when and why (what a shutdown that cannot write
  // them loses: a restarted coordinator starts from the state file).
  std::vector<std::string> DescribeUnsavedChanges() const;
  // Writes the progress reported since the last flush, every job in one transaction.
  absl::Status FlushProgress();
  // Compacts the jobs that ended longer than `retention` ago (StateStore); how many.
  absl::StatusOr<int> Compact(absl::Duration retention);

  // Forgets the jobs that ended longer than `after` ago, but the newest job (whose number
  // the next ones follow, after a restart too): deletes them from the state file and
  // memory; how many. Get then says the id was forgotten.
  absl::StatusOr<int> Forget(absl::Duration after);

  // The ids of the jobs that changed since the previous call, once some did or `timeout`
  // passed (then possibly none). For one consumer: the coordinator's watch hub.
  std::vector<std::string> ChangedJobs(absl::Duration timeout);

  // Blocks until the job differs from the version in `*seen_version` (0: return the
  // current job at once) or `timeout` passes, then returns the job and updates
  // `*seen_version`. DEADLINE_EXCEEDED on timeout with no change.
  absl::StatusOr<v1::Job> WaitForChange(const std::string& job_id, uint64_t* seen_version,
                                        absl::Duration timeout) const;

 private:
  struct Entry {
    // The job as written to the store (what clients see) while it is live; empty once it
    // ended and was written (the state file has it).
    std::optional<v1::Job> job;
    v1::JobSummary summary;
    uint64_t version = 1;
    bool progress_unsaved = false;  // progress reported since the last flush
    // A change the store refused: the job as it stands now, the events not yet written,
    // when the first write failed and why.
    std::optional<v1::Job> unsaved;
    std::vector<v1::JobEvent> unsaved_events;
    absl::Time unsaved_since;
    std::string unsaved_error;
  };
  enum class OnStoreFailure { kDefer, kRefuse };

  JobManager(StateStore* store, const Options& options)
      : store_(store),
        clock_(*options.clock),
        list_scan_limit_(std::max<size_t>(1, options.list_scan_limit)) {}

  // Applies `mutate` to a copy of the job as it stands (its unsaved change, if any),
  // stamps it, appends an event if `event_message` is not empty (read after `mutate` ran,
  // so a mutation may set it), saves it, and only then publishes it. If the store refuses: kDefer
  // keeps the change for RetryUnsavedChanges and returns it; kRefuse returns UNAVAILABLE and
  // changes nothing.
  absl::StatusOr<v1::Job> Mutate(const std::string& job_id,
                                 absl::FunctionRef<absl::Status(v1::Job*)> mutate,
                                 const std::string& event_message,
                                 OnStoreFailure on_failure = OnStoreFailure::kDefer)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::Job> FinishLocked(const std::string& job_id, int32_t attempt,
                                       v1::JobState final_state, const std::string& reason,
                                       const std::string& result, OnStoreFailure on_failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes `job` (just written) what clients see.
  void Publish(Entry& entry, v1::Job job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RecoverAttemptLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `entry`'s unsaved change; publishes it when written.
  absl::Status SaveUnsaved(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckAttempt(const v1::Job& job, int32_t attempt) const;
  // The entry of `job_id` while the job is live at `attempt` (as it stands, its unsaved
  // change included): NOT_FOUND, or FAILED_PRECONDITION when it ended or is at another.
  absl::StatusOr<Entry*> LiveEntryLocked(const std::string& job_id, int32_t attempt)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddJobLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `job_id` changed since the last ChangedJobs, which it wakes.
  void MarkChangedLocked(const std::string& job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Job.checkpoint_step of `entry` (live) to `step`, when it is newer and can be true.
  void KeepNewestCheckpointLocked(Entry& entry, int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // NOT_FOUND for `job_id`, saying so when it is the id of a job that was forgotten.
  absl::Status NoSuchJobLocked(const std::string& job_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores `job` (its spec, estimate and submitter set) as a new PENDING job.
  absl::StatusOr<v1::Job> SubmitLocked(v1::Job job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job an earlier submission with `request_id` made, checked against the new one's
  // fingerprint where both have one, otherwise against its checked `spec`.
  absl::StatusOr<v1::Job> EarlierSubmission(const std::string& job_id, const v1::JobSpec& spec,
                                            const std::string& request_id,
                                            const std::string& submitted_spec_sha256) const;

  StateStore* const store_;
  const Clock& clock_;
  const size_t list_scan_limit_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  absl::btree_map<int64_t, std::string> order_ ABSL_GUARDED_BY(mu_);  // by job number
  int64_t next_job_number_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_set<std::string> changed_ ABSL_GUARDED_BY(mu_);  // since ChangedJobs
  // Wakes ChangedJobs, whose timeout is the watch hub's tick: on the monotonic clock
  // (common/monotonic_wait.h).
  MonotonicWaker jobs_changed_;
  // The job each (submitter, request id) made: SubmitKey -> job id.
  absl::flat_hash_map<std::string, std::string> by_request_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_MANAGER_H_
