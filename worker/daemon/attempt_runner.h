#ifndef SHARDWISE_WORKER_DAEMON_ATTEMPT_RUNNER_H_
#define SHARDWISE_WORKER_DAEMON_ATTEMPT_RUNNER_H_

// Runs one rank of one attempt of a job on its own thread: joins the data plane through
// the coordinator's rendezvous store, verifies it with a real collective, trains, and
// reports each phase and its progress through `report`.
//
// Thread-safety: Abort(), done() and the accessors may be called from any thread.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/monotonic_wait.h"
#include "common/path_policy.h"
#include "grpcpp/channel.h"
#include "proto/worker_service.pb.h"
#include "worker/comm/data_plane.h"
#include "worker/comm/grpc_rendezvous_store.h"
#include "worker/daemon/memory_check.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/timeline.h"
#include "worker/train/hook_schedule.h"
#include "worker/train/plan_mailbox.h"
#include "worker/train/trainer.h"

namespace shardwise {

class AttemptRunner {
 public:
  using Reporter = std::function<void(const v1::AttemptReport&)>;

  // Starts the attempt at once. `channel` reaches the coordinator; `make_device` makes
  // the device of accelerator jobs (empty on CPU-only workers); `memory.available`, when
  // set, is checked against the job's estimated memory per rank before anything starts,
  // and `memory.host_headroom` against each large host allocation.
  AttemptRunner(std::shared_ptr<grpc::Channel> channel, const v1::Assignment& assignment,
                const DataPlaneOptions& data_plane, std::shared_ptr<TrainingHooks> hooks,
                RankDeviceFactory make_device, MemoryProbes memory,
                std::optional<PathPolicy> path_ceiling, Reporter report,
                CollectiveMetrics* collective_metrics = nullptr);
  ~AttemptRunner();  // aborts and joins

  // Asks the attempt to stop; it reports ABORTED with `reason` if it had not finished.
  void Abort(const std::string& reason);
  // Asks a fault-tolerant attempt's rank to leave with its group after the step it is in,
  // for `reason`: it reports LEAVING, then ABORTED (marked worker_leaving when
  // `worker_stops`: its worker is shutting down); false, asking nothing, for an attempt
  // without fault tolerance.
  bool Leave(const std::string& reason, bool worker_stops);
  // Whether a fault-tolerant attempt's rank runs its steps (a Leave is taken at the next
  // one); false while it joins, loads its model or waits to replace a rank.
  bool stepping() const { return stepping_; }
  bool done() const { return done_.load(); }
  bool aborting() const { return abort_.load(); }
  // When Abort() was first called (InfinitePast() if never).
  absl::Time aborted_at() {
    absl::MutexLock lock(&mu_);
    return aborted_at_;
  }
  // Waits until the attempt has reported its end, at most `timeout`; whether it has.
  bool WaitUntilDone(absl::Duration timeout) {
    return finished_.WaitForNotificationWithTimeout(timeout);
  }

  // A communication-hook switch proposed by the coordinator, and its decision
  // (hook_schedule.h); the answer goes back to the coordinator.
  v1::HookChangeAck OnHookChange(const v1::HookChange& change);
  void OnHookDecision(const v1::HookDecision& decision);
  // A prefetch plan re-derived by the coordinator, for the ranks to adopt together.
  void OnPlanUpdate(const v1::PrefetchPlan& plan) { plans_.Deliver(plan); }
  // A fault-tolerant attempt's new membership (membership_mailbox.h).
  void OnMembershipChange(const v1::MembershipChange& change) { membership_.Deliver(change); }

  // Where the rank is now, for the heartbeat.
  v1::RankPosition position() const { return position_.Snapshot(); }
  const std::string& job_id() const { return assignment_.job_id(); }
  int32_t rank() const { return assignment_.rank(); }
  int32_t attempt() const { return assignment_.attempt(); }
  const std::string& rendezvous_token() const { return assignment_.rendezvous_token(); }

 private:
  // The attempt: checks, joining the data plane, training, the final report.
  void Run();
  // Ends the attempt with an ABORTED report: `status`'s message, or the abort's reason
  // when the coordinator aborted it.
  void Fail(const absl::Status& status);
  // What the rank trains with; `last_progress` is kept up to date with each step's.
  TrainingContext MakeTrainingContext(GrpcRendezvousStore* store,
                                      std::shared_ptr<gloo::Context> world,
                                      const DataPlaneOptions& options, v1::Progress* last_progress);
  // Trains, with a thread that publishes progress meanwhile (PublishProgress).
  absl::StatusOr<TrainingResult> TrainPublishingProgress(const TrainingContext& training);
  // RESOURCE_EXHAUSTED when this worker lacks the memory the job's rank is estimated to
  // need (memory_check.h); OK when it has it, or cannot tell.
  absl::Status CheckMemory() const;
  // Every path of the spec against the assignment's path policy, bounded by this worker's
  // own roots where it has some, on this worker's file system (common/path_policy.h):
  // inputs exist under the input roots, outputs can be written under the output roots.
  // The spec with every path canonical here, which the attempt reads and writes; a
  // permanent failure otherwise: every attempt would fail the same way.
  absl::StatusOr<v1::JobSpec> CheckPaths() const;
  // The job's tokenizer folder, every file of it (tokenizer::CheckTokenizerFolder).
  absl::Status CheckTokenizer() const;
  // The job's own checkpoints, where an earlier attempt reported one (resume_check.h).
  absl::Status CheckResumable() const;
  // A report of this rank's attempt in `phase`, with nothing else yet.
  v1::AttemptReport NewReport(v1::AttemptPhase phase) const;
  // `permanent`: an ABORTED that every attempt would repeat (contracts/permanent_failure.h).
  void Report(v1::AttemptPhase phase, const std::string& message, v1::Progress progress,
              bool permanent = false);
  // `report` (from NewReport, with its phase's own fields set) with the message, the
  // progress and the spans recorded since the last.
  void Report(v1::AttemptReport report, const std::string& message, v1::Progress progress);
  // Sends the newest progress without ever blocking the training step: the step only
  // replaces `pending_progress_`; this thread sends what is there.
  void PublishProgress();

  const std::shared_ptr<grpc::Channel> channel_;
  const v1::Assignment assignment_;
  const DataPlaneOptions data_plane_;
  const std::shared_ptr<TrainingHooks> faults_;  // tests only; may be null
  const RankDeviceFactory make_device_;
  const MemoryProbe available_memory_;
  // The worker's own roots (--allowed_input_paths, --allowed_output_paths), which bound
  // every job's paths besides the coordinator's; none: the coordinator's alone.
  const std::optional<PathPolicy> path_ceiling_;
  // The assignment's spec as CheckPaths left it (set before the rank joins, then only
  // read): what the attempt trains on.
  v1::JobSpec spec_;
  const Reporter report_;
  CollectiveMetrics* const collective_metrics_;  // not owned; may be null

  absl::Mutex mu_;
  std::string abort_reason_ ABSL_GUARDED_BY(mu_);
  absl::Time aborted_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::atomic<bool> abort_{false};
  std::atomic<bool> leave_{false};
  std::atomic<bool> stepping_{false};
  std::atomic<bool> worker_stops_{false};
  std::string leave_reason_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> done_{false};
  // Notified when done_ is set; waited for with a timeout on the monotonic clock.
  MonotonicNotification finished_;
  CpuCachingAllocator allocator_;
  HookSchedule hooks_;
  PlanMailbox plans_;
  MembershipMailbox membership_;
  RankPosition position_;
  Timeline timeline_;

  absl::Mutex progress_mu_;
  std::optional<v1::Progress> pending_progress_ ABSL_GUARDED_BY(progress_mu_);
  bool training_over_ ABSL_GUARDED_BY(progress_mu_) = false;
  std::thread thread_;  // last: starts after everything above is ready
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_ATTEMPT_RUNNER_H_
