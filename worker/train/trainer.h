#ifndef SHARDWISE_WORKER_TRAIN_TRAINER_H_
#define SHARDWISE_WORKER_TRAIN_TRAINER_H_

// Trains one rank of a job: connects its groups and device, opens its data, loads the
// initial weights (or a checkpoint: the job's own newest when this is a later attempt, or
// init.checkpoint_dir's: the step an earlier attempt started from, else the newest), runs the steps
// (micro-steps without sync, then one with), evaluates, writes sharded checkpoints, reports
// progress, and at the end gathers the model, which rank 0 writes.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "contracts/job_identity.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "proto/worker_service.pb.h"
#include "worker/comm/collective_metrics.h"
#include "worker/comm/data_plane.h"
#include "worker/comm/rank_device.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/timeline.h"
#include "worker/train/hook_schedule.h"
#include "worker/train/membership_mailbox.h"
#include "worker/train/plan_mailbox.h"
#include "worker/train/training_hooks.h"

namespace shardwise {

struct TrainingResult {
  int64_t steps = 0;
  double first_loss = 0;
  double last_loss = 0;
  double steps_per_second = 0;
  double tokens_per_second = 0;  // GPT jobs
  double first_val_loss = -1;    // -1: not evaluated
  double last_val_loss = -1;
  int64_t first_val_loss_step = -1;  // the steps completed when each was measured
  int64_t last_val_loss_step = -1;
  std::string model_path;          // where rank 0 wrote the final model; empty if not asked to
  bool led = false;                // this rank wrote the job's outputs (its world's rank 0)
  int64_t resumed_from_step = -1;  // the checkpoint's step, if the job resumed from one
  int64_t checkpoints_written = 0;
  // The rank's device allocator (the GPU's on CUDA, context.allocator on the CPU) once
  // the model is released: the run's peaks, and what leaked.
  MemoryStats device_memory;
  std::string Summary() const;
};

struct TrainingContext {
  std::string job_id;   // names this job's checkpoints and final model, with job_uid
  std::string job_uid;  // Job.uid (contracts/job_identity.h); empty for a job without one
  JobIdentity job() const { return JobIdentity{job_id, job_uid}; }
  int attempt = 1;  // a later attempt resumes from the job's newest checkpoint
  // The step of init.checkpoint_dir's checkpoint an earlier attempt started from
  // (Assignment.init_checkpoint_step): without a checkpoint of the job's own, this
  // attempt starts from it, not from the folder's newest. Unset: the newest.
  std::optional<int64_t> init_checkpoint_step;
  // The step of the job's newest checkpoint in output.checkpoint_dir that an earlier
  // attempt reported (Assignment.checkpoint_step): a later attempt that finds none of
  // the job's there fails (UNAVAILABLE), not this host's folder, rather than start the
  // job over. Unset: none reported.
  std::optional<int64_t> own_checkpoint_step;
  int rank = 0;
  int world_size = 1;
  gloo::rendezvous::Store* store = nullptr;  // the attempt's rendezvous, for sub-groups
  std::shared_ptr<gloo::Context> world;      // the connected world group
  DataPlaneOptions data_plane;
  const std::atomic<bool>* abort = nullptr;  // checked between steps
  // Called after every step with the job's progress; must not block for long.
  std::function<void(const v1::Progress&)> on_progress;
  Allocator* allocator = nullptr;
  // Communication-hook switches agreed with the coordinator; none if null.
  HookSchedule* hook_schedule = nullptr;
  // Prefetch plans the coordinator re-derived, adopted by every rank at one step; none
  // if null.
  const PlanMailbox* plans = nullptr;
  // Fault-tolerant jobs (spec.fault_tolerance): the coordinator's membership changes. Null:
  // a failed collective fails the attempt, as without fault tolerance.
  MembershipMailbox* membership = nullptr;
  // Fault-tolerant jobs: set when this rank's worker is shutting down, so that the rank
  // leaves with its group after the step it is in (none if null); `on_leaving` is called
  // once then, with that step, before the rank's commit vote tells its peers.
  const std::atomic<bool>* leave = nullptr;
  std::function<void(int64_t step)> on_leaving;
  // Called once the rank's model is built and it runs its steps: from then on a leave
  // is taken at the next step's commit vote (before, the rank cannot leave, only stop).
  std::function<void()> on_steps_started;
  // Set: this rank replaces one that left (Assignment.join): it connects this epoch's
  // world instead of `world`, and takes its state from the live ranks.
  const v1::MembershipChange* join = nullptr;
  // With `join`: how long it waits for the live ranks at that epoch's rendezvous
  // (Assignment.join_wait_ms), at least the data plane's timeout.
  std::chrono::milliseconds join_wait{0};
  // Fault-tolerant jobs: called when this rank took its shard's state from a live rank
  // (a replacement's heal, or a rank a step behind); none if empty.
  std::function<void(const v1::StateTransfer&)> on_state_received;
  // Fault-tolerant jobs: called on the leader of a membership epoch once the ranks moved to
  // it, with the epoch and the first step it trains (the job's history records it); none
  // if empty.
  std::function<void(int32_t epoch, int64_t first_step)> on_epoch_started;
  // Called with the execution order of this attempt's first micro-step, and once more
  // (changed = true) if a later micro-step's order differs from it.
  std::function<void(const v1::ExecutionOrder& order, int64_t step, bool changed)>
      on_execution_order;
  // Where the rank is (step, phase, unit, collective), for the heartbeat; none if null.
  RankPosition* position = nullptr;
  // Where to record the rank's spans (timeline.h); none if null.
  Timeline* timeline = nullptr;
  // Where to count its collectives and their time (the worker's metrics); none if null.
  CollectiveMetrics* collective_metrics = nullptr;
  // Makes the device and device communicators of jobs whose device is not the CPU; jobs
  // on such devices fail (FAILED_PRECONDITION) when it is empty.
  RankDeviceFactory make_device;
};

// `hooks` (tests only; may be null) faults or shakes the training.
absl::StatusOr<TrainingResult> Train(const v1::JobSpec& spec, const TrainingContext& context,
                                     TrainingHooks* hooks = nullptr);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_TRAINER_H_
