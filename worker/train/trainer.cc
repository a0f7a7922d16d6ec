#include "worker/train/trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/path_policy.h"
#include "common/safe_write.h"
#include "common/status_macros.h"
#include "contracts/checkpoint_files.h"
#include "contracts/fsdp_layout.h"
#include "contracts/job_ranks.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/membership.h"
#include "contracts/permanent_failure.h"
#include "contracts/validation_loss_text.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "tokenizer/manifest.h"
#include "worker/compute/cpu/gemm.h"
#include "worker/data/batches.h"
#include "worker/data/huggingface_weights.h"
#include "worker/data/weights.h"
#include "worker/fsdp/checkpoint.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/fsdp/full_model_stream.h"
#include "worker/fsdp/grad_scaler.h"
#include "worker/fsdp/lr_schedule.h"
#include "worker/fsdp/shard_assembler.h"
#include "worker/runtime/critical_path.h"
#include "worker/train/checkpoint_pruner.h"
#include "worker/train/final_model_owner.h"
#include "worker/train/huggingface_export.h"
#include "worker/train/membership_moves.h"
#include "worker/train/pending_losses.h"
#include "worker/train/rank_runtime.h"
#include "worker/train/rank_state.h"
#include "worker/train/speed_meter.h"

namespace shardwise {
namespace {

// The slowest storage a job's writes are waited for at: a network file system many
// writers share. At it a 7B model's final FP32 file (28 GB) takes about 9 minutes, where
// the data plane's timeout (a minute by default) would take its writer for lost.
constexpr double kSlowestWriteBytesPerSecond = 50e6;

std::chrono::milliseconds WriteAllowance(uint64_t bytes) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(bytes) / kSlowestWriteBytesPerSecond * 1e3));
}

// ALREADY_EXISTS writing one of the job's outputs beside `model` (that output's model
// file): a file put there since the job was admitted, which each restart would train the
// job again only to be refused by, fails it for good; unless `model` names this job (its
// leader of a membership before wrote the outputs meanwhile).
absl::Status PermanentIfTaken(absl::Status written, const std::string& model,
                              const JobIdentity& job) {
  if (!absl::IsAlreadyExists(written) || WrittenByJob(model, job)) return written;
  return MarkPermanent(written);
}

// A job's file that does not fit it (INVALID_ARGUMENT: another model's weights, a token
// file of another vocabulary), is corrupt (DATA_LOSS) or is not there (NOT_FOUND: no
// complete checkpoint in init.checkpoint_dir) fails every attempt alike: not re-queued.
// What this host could not read now (UNAVAILABLE) or may not read (PERMISSION_DENIED: its
// permissions may be one host's) and the rest are the attempt's.
absl::Status PermanentIfInTheJobsFiles(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsDataLoss(status) || absl::IsNotFound(status)
             ? MarkPermanent(status)
             : status;
}

// Where a rank's parameters come from: the job's own newest checkpoint when a later
// attempt resumes, else init.checkpoint_dir's (the step an earlier attempt started from,
// else the newest), else none (seed or safetensors); a
// checkpoint by its step, which names its folder. Each rank of an attempt starts from
// the one its world rank 0 found (AgreeOnTheCheckpoint).
struct CheckpointChoice {
  enum Source { kNone = 0, kOwn = 1, kInit = 2 };
  Source source = kNone;
  int64_t step = 0;
};

// init.checkpoint_dir's checkpoint: the one an earlier attempt started from, else the
// newest. A later attempt starts where the first did, as a restarted script loading its
// fixed path would, not from whatever a producer wrote since.
absl::StatusOr<CheckpointChoice> InitCheckpoint(const v1::JobSpec& spec,
                                                const TrainingContext& context) {
  const std::string& dir = spec.init().checkpoint_dir();
  if (context.init_checkpoint_step.has_value()) {
    const int64_t step = *context.init_checkpoint_step;
    const std::string folder = fsdp::CheckpointFolder(dir, step);
    const absl::Status there = fsdp::ReadCheckpointManifest(folder).status();
    // Gone: not found, or unreadable where its folder no longer is (a stale NFS handle).
    std::error_code unlisted;
    if (absl::IsNotFound(there) ||
        (!there.ok() && !std::filesystem::exists(folder, unlisted) && !unlisted)) {
      return absl::NotFoundError(
          absl::StrCat("job.init.checkpoint_dir: the checkpoint of step ", step,
                       " that the job's first attempt started from is gone (", there.message(),
                       "); a restart starts from that one, not from the folder's newest"));
    }
    RETURN_IF_ERROR(there);
    return CheckpointChoice{CheckpointChoice::kInit, step};
  }
  ASSIGN_OR_RETURN(const fsdp::FoundCheckpoint newest, fsdp::FindLatestCheckpoint(dir));
  return CheckpointChoice{CheckpointChoice::kInit, newest.step};
}

absl::Status EveryOwnCheckpointDamaged(const std::string& dir,
                                       const std::vector<fsdp::PassedOverStep>& damaged) {
  return absl::DataLossError(absl::StrCat(
      "output.checkpoint_dir: each of the ", damaged.size(), " checkpoints this job wrote in '",
      dir, "' is damaged (the newest, step ", damaged.front().step, ": ", damaged.front().why,
      "); a restart resumes from one of them, never from the job's start over them: restore "
      "one, or submit the job again to train it from its start"));
}

// An earlier attempt reported the job's checkpoint of step `step` complete in `dir`, and
// this rank finds none of the job's there, although its check before joining did
// (worker/daemon/resume_check.h): removed since (by hand, or a superseded attempt's
// pruner), or a folder this host sees only now and then. The attempt's fault, not the
// job's: re-queued under the restart policy, as a host that cannot read a file now is.
absl::Status NoneOfTheReportedCheckpoints(const std::string& dir, int64_t step,
                                          const absl::Status& found) {
  return absl::UnavailableError(absl::StrCat(
      "output.checkpoint_dir: ", found.message(), " on this host, but an earlier attempt of ",
      "the job wrote its checkpoint of step ", step,
      " there (Job.checkpoint_step): the folder is not mounted on this host, or the "
      "checkpoints were removed; the attempt fails rather than train the job again from its "
      "start. To start the job over, submit it again"));
}

absl::StatusOr<CheckpointChoice> NewestCheckpoint(const v1::JobSpec& spec,
                                                  const TrainingContext& context) {
  const std::string& own = spec.output().checkpoint_dir();
  if (context.attempt > 1 && !own.empty()) {
    std::vector<fsdp::PassedOverStep> passed_over;
    auto newest = fsdp::FindLatestCheckpointOf(own, context.job(), &passed_over);
    for (const fsdp::PassedOverStep& damaged : passed_over) {
      LogWarning(LogContext().Job(context.job_id).Attempt(context.attempt).Rank(context.rank),
                 absl::StrCat("passing over the job's checkpoint of step ", damaged.step, ": ",
                              damaged.why));
    }
    if (newest.ok()) return CheckpointChoice{CheckpointChoice::kOwn, newest->step};
    if (!absl::IsNotFound(newest.status())) return newest.status();
    // Starting over would train the job again from its start, and its next checkpoint
    // would prune what is left of the ones it wrote, without a word.
    if (!passed_over.empty()) return EveryOwnCheckpointDamaged(own, passed_over);
    if (context.own_checkpoint_step.has_value()) {
      return NoneOfTheReportedCheckpoints(own, *context.own_checkpoint_step, newest.status());
    }
  }
  if (spec.init().has_checkpoint_dir()) return InitCheckpoint(spec, context);
  return CheckpointChoice{};
}

std::string ChosenFolder(const CheckpointChoice& choice, const v1::JobSpec& spec) {
  return fsdp::CheckpointFolder(choice.source == CheckpointChoice::kOwn
                                    ? spec.output().checkpoint_dir()
                                    : spec.init().checkpoint_dir(),
                                choice.step);
}

// Whether `folder` failed to load with `loaded` because it is gone: removed since rank 0
// found it (a producer job keeping few checkpoints, a superseded attempt's pruner, which
// renames a folder away whole), not damaged.
bool RemovedWhileLoading(const std::string& folder, const absl::Status& loaded) {
  return !loaded.ok() && absl::IsNotFound(fsdp::ReadCheckpointManifest(folder).status());
}

// This thread is the step's critical path: calls to the coordinator from here count.
class TrainingThreadMark {
 public:
  TrainingThreadMark() { on_training_thread = true; }
  ~TrainingThreadMark() { on_training_thread = false; }
};

// One rank's training, a step at a time. Each method does one part of a step; Run()
// strings them together.
class RankTrainer : private MembershipMoves::Rank {
 public:
  RankTrainer(const v1::JobSpec& spec, const TrainingContext& context, TrainingHooks* hooks)
      : spec_(spec),
        context_(context),
        hooks_(hooks != nullptr ? hooks : &no_hooks_),
        scaler_(spec.grad_scaler()),
        moves_(spec, context, hooks_, this) {}

  absl::StatusOr<TrainingResult> Run();

 private:
  // Run's body; an allocation failure anywhere in it ends Run with a status naming
  // `activity_`, so the worker survives a job too large for it.
  absl::StatusOr<TrainingResult> Body();
  absl::Status Setup();
  // From where the rank stands (next_) to the end of a step's parts: the step, then the
  // checkpoint and the evaluation due after it; next_ follows each part done, so that a
  // failure leaves it on the part that failed.
  absl::Status RunToTheEndOfAStep();
  // After `failure` (a collective that failed): the next membership epoch, the state and
  // the part to go on from that every live rank agrees on (MembershipMoves::Recover).
  absl::Status RecoverFrom(const absl::Status& failure);
  // The first part due from next_ on, in words: "the evaluation after step 39", "step 40".
  std::string WhatComesNext() const;
  // The optimizer and pending losses around a newly built `model`.
  void AdoptModel(std::unique_ptr<fsdp::FsdpModel> model);
  // FAILED_PRECONDITION where any rank opened other data than rank 0 (DataIdentity).
  absl::Status AgreeOnTheData();
  // The model at its start: from the checkpoint every rank agreed on, restored with its
  // optimizer state, else from the initial weights.
  absl::Status BuildInitialModel();
  absl::StatusOr<CheckpointChoice> AgreeOnTheCheckpoint();
  // The agreed checkpoint read for this rank (none when the model starts from its
  // initial weights), chosen again while one is removed before every rank has read it.
  absl::StatusOr<std::optional<fsdp::LoadedCheckpoint>> LoadAgreedCheckpoint();
  // `collective` over the world waiting for a peer with the data plane's timeout, not the
  // peer timeout a step's collectives wait: around work each rank takes its own time over
  // (writing its shards, finding and loading a checkpoint).
  absl::Status WithDataPlaneTimeout(const std::function<absl::Status()>& collective,
                                    std::chrono::milliseconds extra = {});
  absl::Status BarrierWithDataPlaneTimeout();
  // A barrier that waits for ranks writing `bytes` (a checkpoint's shards, the final
  // model): the data plane's timeout plus the write at WriteAllowance's pace, so that a
  // large model's write to slow storage is not taken for a lost peer.
  absl::Status BarrierAfterWriting(uint64_t bytes);
  absl::Status Restore(const fsdp::LoadedCheckpoint& checkpoint);
  absl::Status Step(int64_t step);
  absl::Status BeginStep(int64_t step);
  // The step's micro-steps (no sync, then sync), their losses left pending on the device.
  absl::Status AccumulateGradients(int64_t step);
  void ObserveExecutionOrder(int64_t step);
  // The loss scaler's unscale and decision; whether the step is skipped.
  absl::StatusOr<bool> UnscaleGradients(int64_t step);
  // The pending steps' losses over the global batch, and the adoption of a newer
  // prefetch plan when every rank holds it: one all-reduce per step, the plan's vote
  // riding on the last. A loss that is not finite fails the job naming its step.
  absl::Status AgreeOnLossesAndPlan();
  void MeasureSpeed();
  // Each part after a step, when due; whether it was (and done).
  bool CheckpointDue() const;
  absl::StatusOr<bool> MaybeCheckpoint();
  bool EvaluationDue(int64_t steps_done) const;
  absl::StatusOr<bool> MaybeEvaluate(int64_t steps_done);
  // "the evaluation after step 39", "the evaluation before the first step".
  std::string EvaluationName(int64_t steps_done) const;
  absl::StatusOr<double> Evaluate();
  void ReportProgress(double step_seconds);
  // The attempt's device memory peaks so far (Progress.peak_allocated_bytes and
  // peak_reserved_bytes).
  void ReportPeakMemory(v1::Progress* progress) const;
  absl::Status WriteFinalModel();
  absl::Status WriteFinalModelStreams();
  absl::Status WriteFinalModelFiles(std::optional<fsdp::FullModelStream>& exported,
                                    std::optional<fsdp::FullModelStream>& file);
  absl::Status WriteFinalModelFile(fsdp::FullModelStream& file);
  TensorLayouts FinalModelLayouts() const;

  // ---- fault tolerance (spec.fault_tolerance; context.membership set) ----
  bool FaultTolerant() const { return context_.membership != nullptr; }
  // Every live rank finished the step's backward: one small all-reduce before the
  // optimizer step, so that no rank applies a step another could not finish. A rank whose
  // vote completed while another's failed (a peer lost in the middle) is a step ahead;
  // the shard group's second vote keeps its members together, so that a group is ahead
  // or behind as a whole and each shard of the step ahead is held by some live rank.
  //
  // The world's vote also says which ranks leave with their groups after this step, so
  // that every rank learns it at the same step (MembershipMoves::Tally).
  absl::Status CommitVote(int64_t step);
  // Puts the device's stream clock (an accelerator's) on the rank's timeline.
  void AttachStreamClock();
  // fault_tolerance.batch KEEP_GLOBAL: the rows of the ranks that left which this rank
  // trains on as well (contracts/membership.h, CoveredRanks), from its own data's files,
  // opened once (not again, a scan of every id, at each membership change).
  void CoverLeftRanks();
  // Micro-steps per step: the rank's own A, and A more for each rank it covers.
  int MicroStepsPerStep() const {
    return std::max(1, spec_.gradient_accumulation_steps()) *
           (1 + static_cast<int>(covered_data_.size()));
  }
  // Whether the live ranks train on the rows of ranks that left (KEEP_GLOBAL, once some
  // left): the same on every rank, whether or not it covers one itself.
  bool KeepsGlobalBatch() const {
    return spec_.fault_tolerance().batch() == v1::FaultTolerance::KEEP_GLOBAL &&
           static_cast<int>(moves_.live_ranks().size()) < JobRanks(spec_);
  }
  // What a micro-batch's loss weighs against a rank's share of an intact step: live /
  // the job's ranks while KeepsGlobalBatch, 1 otherwise.
  float BatchWeight() const {
    return KeepsGlobalBatch() ? static_cast<float>(LiveRanks()) / JobRanks(spec_) : 1.0f;
  }
  // A replacement rank: the state of the live ranks' step, each shard from a live rank
  // that holds it (MembershipMoves::Join); it trains on from their step.
  absl::Status TakeStateOfTheLiveRanks();
  // A replacement's state before its heal: shards of its sizes (the model's flat layout
  // over its shard group), no optimizer state, behind every live rank. No weights are
  // read and no model is built: the live ranks' state is what it is built from.
  absl::StatusOr<RankState> EmptyState() const;
  // What a move does to the model and runtime (MembershipMoves::Rank).
  absl::StatusOr<RankState> CaptureState() override;
  void ReleaseRuntime() override;
  bool CloseRuntimeConnections() override;
  absl::Status ConnectRuntime(const TrainingContext& epoch_context) override;
  Communicator& World() override { return *runtime_->world(); }
  const fsdp::ShardingPlan& Plan() const override { return plan_; }
  absl::Status RestoreState(const RankState& state) override;
  // The live ranks of the current epoch, and whether this rank leads them (the lowest:
  // it writes the manifest and the final model, and its progress is the job's).
  int LiveRanks() const { return runtime_->world()->size(); }
  bool Leads() const { return runtime_->world()->rank() == 0; }
  // What the leader writes of the final model: the file and the Hugging Face export,
  // each at most 4 bytes a parameter.
  uint64_t FinalModelBytes() const;
  // Ends the model's life (its threads, buffers and shards) in the destructor's order and
  // returns the device allocator's counters then: the run's peaks, and what is still live
  // (nothing, unless a buffer leaked).
  MemoryStats ReleaseModel();

  const v1::JobSpec& spec_;
  const TrainingContext& context_;
  TrainingHooks no_hooks_;
  TrainingHooks* const hooks_;
  fsdp::ShardingPlan plan_;
  std::unique_ptr<RankRuntime> runtime_;
  CommStats earlier_traffic_;  // of the runtimes of this attempt's earlier epochs
  // The device allocator's peaks in the runtimes of this attempt's earlier epochs (an
  // accelerator's allocator is made anew with each), so that the reported peaks hold the
  // attempt's.
  int64_t earlier_peak_allocated_ = 0;
  int64_t earlier_peak_reserved_ = 0;
  // The device's stream clock on the timeline; ends before runtime_ (the device) and after
  // model_ (whose threads record spans).
  std::unique_ptr<StreamClockAttachment> stream_clock_;
  std::unique_ptr<BatchSource> data_;
  std::vector<std::unique_ptr<BatchSource>> covered_data_;  // KEEP_GLOBAL, ranks left
  std::unique_ptr<fsdp::Optimizer> optimizer_;
  // Last: destroyed first, joining its threads (which use the device, the groups and the
  // optimizer).
  std::unique_ptr<fsdp::FsdpModel> model_;
  std::unique_ptr<PendingLosses> losses_;  // on model_'s device
  fsdp::GradScaler scaler_;
  TrainingResult result_;
  int64_t first_step_ = 0;
  // The step of init.checkpoint_dir's checkpoint the attempt started from, if it did
  // (Progress.init_checkpoint_step: the coordinator keeps later attempts on it).
  std::optional<int64_t> init_checkpoint_step_;
  // The first part after result_.steps not finished: the evaluation before the first
  // step, then each step's parts in turn (a replacement takes the live ranks' with their
  // state).
  AfterSteps next_ = AfterSteps::kEvaluation;
  int64_t checkpointed_steps_ = -1;  // the steps of the newest checkpoint written
  double lr_ = 0;
  // The first micro-step's execution order, which later ones are compared with.
  std::optional<v1::ExecutionOrder> first_order_;
  bool order_change_reported_ = false;
  int64_t plan_since_step_ = 1;  // a rank derives its first plan in the first step
  int64_t calls_before_training_ = 0;
  int64_t calls_after_first_step_ = -1;  // the counter's value once the first step ended
  int64_t loss_step_ = 0;                // steps done when result_.last_loss was measured
  std::optional<SpeedMeter> speed_;      // from the start of Body
  std::string activity_ = "starting";    // what Body is doing, for an out-of-memory report
  // output.keep_checkpoints, on the leader (made at its first checkpoint); the removals in
  // flight are waited for when the trainer ends.
  std::unique_ptr<CheckpointPruner> pruner_;
  // The membership: the epoch, its world and rendezvous (last: destroyed first, as the
  // epoch's connections were before the model's threads ended).
  MembershipMoves moves_;
};

absl::Status RankTrainer::Setup() {
  cpu::SetBlasThreads(1);
  // Before any thread of the model reports a position.
  if (context_.position != nullptr && hooks_ != &no_hooks_) {
    context_.position->set_observer(
        [hooks = hooks_](int64_t step, const char* point) { hooks->AtPoint(step, point); });
  }
  moves_.Start();
  // A replacement connects its epoch's groups as it takes its state (below).
  if (context_.join == nullptr) {
    activity_ = "connecting the rank's groups";
    ASSIGN_OR_RETURN(plan_, fsdp::PlanSharding(spec_.fsdp(), context_.world_size, context_.rank));
    ASSIGN_OR_RETURN(runtime_, RankRuntime::Connect(spec_, plan_, context_));
    runtime_->SetPeerTimeout(moves_.PeerTimeout());
    AttachStreamClock();
  }
  activity_ = "opening the training data";
  auto data = OpenBatchSource(spec_, context_.rank);
  if (!data.ok()) return PermanentIfInTheJobsFiles(data.status());
  data_ = std::move(*data);
  // A replacement reads no weights: its model is built from the live ranks' shards.
  if (context_.join != nullptr) return TakeStateOfTheLiveRanks();
  RETURN_IF_ERROR(AgreeOnTheData());
  // A job that may grow starts with some of its groups not placed yet (KEEP_GLOBAL).
  CoverLeftRanks();
  RETURN_IF_ERROR(BuildInitialModel());
  // Loading takes each rank its own time, which the first step's collectives (bounded by
  // the peer timeout under fault tolerance) would not wait for.
  return BarrierWithDataPlaneTimeout();
}

// Each rank opened the job's files on its own host: ranks that opened different ones
// would draw overlapping or missing sequences (worker/data/data_identity.h).
absl::Status RankTrainer::AgreeOnTheData() {
  activity_ = "comparing the data each rank opened";
  Communicator& world = *runtime_->world();
  // Each rank's in its own slot, summed: an all-gather made of the all-reduce the
  // control exchanges use (AgreeOnTheCheckpoint), so that the all-gathers' traffic in
  // progress stays the parameters'.
  const std::array<int64_t, DataIdentity::kPackedSize> mine = data_->identity().Pack();
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(world.size()), 0);
  std::copy(mine.begin(), mine.end(),
            all.begin() + std::ptrdiff_t{world.rank()} * DataIdentity::kPackedSize);
  RETURN_IF_ERROR(WithDataPlaneTimeout(
      [&] { return world.AllReduce(all.data(), all.size(), ScalarType::kInt64); }));
  std::vector<DataIdentity> by_rank;
  for (size_t at = 0; at < all.size(); at += mine.size()) {
    by_rank.push_back(DataIdentity::Unpack(all.data() + at));
  }
  return CheckEveryRankReadTheSameData(spec_, by_rank);
}

absl::StatusOr<CheckpointChoice> RankTrainer::AgreeOnTheCheckpoint() {
  activity_ = "finding the checkpoint to start from";
  absl::StatusOr<CheckpointChoice> found = NewestCheckpoint(spec_, context_);
  if (!found.ok()) return PermanentIfInTheJobsFiles(found.status());
  // Rank 0's, over the world: each rank looks on its own, and a checkpoint written
  // meanwhile (by a job this one starts from, or an attempt superseded) or a folder one
  // host sees late would start the ranks from different steps, their collectives pairing
  // and training on a mix without a word. Waited for with the data plane's timeout: the
  // ranks arrive as their hosts look.
  Communicator& world = *runtime_->world();
  double choice[2] = {0, 0};
  if (world.rank() == 0) {
    choice[0] = static_cast<double>(found->source);
    choice[1] = static_cast<double>(found->step);
  }
  RETURN_IF_ERROR(
      WithDataPlaneTimeout([&] { return world.AllReduce(choice, 2, ScalarType::kFloat64); }));
  return CheckpointChoice{static_cast<CheckpointChoice::Source>(choice[0]),
                          static_cast<int64_t>(choice[1])};
}

absl::Status RankTrainer::BarrierWithDataPlaneTimeout() {
  return WithDataPlaneTimeout([&] { return runtime_->world()->Barrier(); });
}

absl::Status RankTrainer::BarrierAfterWriting(uint64_t bytes) {
  return WithDataPlaneTimeout([&] { return runtime_->world()->Barrier(); }, WriteAllowance(bytes));
}

absl::Status RankTrainer::WithDataPlaneTimeout(const std::function<absl::Status()>& collective,
                                               std::chrono::milliseconds extra) {
  moves_.SetWorldTimeout(context_.data_plane.timeout + extra);
  absl::Status done = collective();
  moves_.SetWorldTimeout(moves_.PeerTimeout());
  return done;
}

absl::StatusOr<std::optional<fsdp::LoadedCheckpoint>> RankTrainer::LoadAgreedCheckpoint() {
  // Each choice is rank 0's newest then: a checkpoint removed again and again (a producer
  // writing faster than this job loads) is this attempt's failure, not the job's.
  constexpr int kChoices = 3;
  for (int chosen = 1;; ++chosen) {
    ASSIGN_OR_RETURN(const CheckpointChoice choice, AgreeOnTheCheckpoint());
    if (choice.source == CheckpointChoice::kNone) return std::nullopt;
    activity_ = "loading the initial weights";
    hooks_->AtPoint(choice.step, "loading the checkpoint");
    // Only this rank's shards of the parameters and state.
    const std::string folder = ChosenFolder(choice, spec_);
    absl::StatusOr<fsdp::LoadedCheckpoint> checkpoint = fsdp::LoadCheckpoint(folder, spec_, plan_);
    double removed = RemovedWhileLoading(folder, checkpoint.status()) ? 1 : 0;
    if (!checkpoint.ok() && removed == 0) return PermanentIfInTheJobsFiles(checkpoint.status());
    // Every rank starts from one step: where any rank found it gone, all choose again.
    RETURN_IF_ERROR(WithDataPlaneTimeout(
        [&] { return runtime_->world()->AllReduce(&removed, 1, ScalarType::kFloat64); }));
    if (removed == 0) {
      if (choice.source == CheckpointChoice::kInit) init_checkpoint_step_ = choice.step;
      return std::optional<fsdp::LoadedCheckpoint>(*std::move(checkpoint));
    }
    if (chosen == kChoices) {
      return absl::UnavailableError(absl::StrCat(
          "checkpoint '", folder, "' was removed while the ranks loaded it, as were the ",
          kChoices - 1, " chosen before it"));
    }
    LogWarning(LogContext().Job(context_.job_id).Attempt(context_.attempt).Rank(context_.rank),
               absl::StrCat("checkpoint '", folder,
                            "' was removed while the ranks loaded it; choosing again"));
  }
}

absl::Status RankTrainer::BuildInitialModel() {
  ASSIGN_OR_RETURN(auto checkpoint, LoadAgreedCheckpoint());
  if (checkpoint.has_value()) {
    activity_ = "building the sharded model";
    // The rank's own shards: the whole model only where its shard group is of one.
    ASSIGN_OR_RETURN(auto model,
                     fsdp::FsdpModel::CreateFromShards(spec_, plan_, runtime_->model_groups(),
                                                       runtime_->device(), checkpoint->params));
    AdoptModel(std::move(model));
    std::vector<std::vector<float>>().swap(checkpoint->params);
    return PermanentIfInTheJobsFiles(Restore(*checkpoint));
  }
  // Read (or generated) a parameter at a time, only what lies in this rank's shards read
  // and kept.
  ASSIGN_OR_RETURN(const fsdp::FlatLayout layout,
                   fsdp::BuildFlatLayout(spec_.model(), spec_.wrap()));
  fsdp::ShardAssembler assembler(layout, plan_);
  RETURN_IF_ERROR(PermanentIfInTheJobsFiles(InitialWeights(spec_, assembler)));
  auto shards = std::move(assembler).Finish();
  if (!shards.ok()) return PermanentIfInTheJobsFiles(shards.status());
  activity_ = "building the sharded model";
  ASSIGN_OR_RETURN(auto model,
                   fsdp::FsdpModel::CreateFromShards(spec_, plan_, runtime_->model_groups(),
                                                     runtime_->device(), *shards));
  AdoptModel(std::move(model));
  return absl::OkStatus();
}

void RankTrainer::AdoptModel(std::unique_ptr<fsdp::FsdpModel> model) {
  model_ = std::move(model);
  model_->set_position(context_.position);
  model_->set_timeline(context_.timeline);
  model_->set_delays(hooks_->ComputeDelay(), hooks_->CommunicationDelay());
  optimizer_ = fsdp::Optimizer::Create(spec_.optimizer(), model_->num_units(), runtime_->device());
  model_->EnableOptimizerOverlap(optimizer_.get());
  losses_ = std::make_unique<PendingLosses>(runtime_->device(), LossReadInterval(spec_),
                                            MicroStepsPerStep());
}

absl::Status RankTrainer::Restore(const fsdp::LoadedCheckpoint& checkpoint) {
  const bool resuming = ManifestWriter(checkpoint.manifest) == context_.job() &&
                        !context_.job_id.empty() && context_.attempt > 1;
  if (resuming) {
    // A damaged manifest must not start the run before its first step (negative sample
    // indices) or past its last (an untrained model written as trained).
    if (checkpoint.manifest.step() < 0 || checkpoint.manifest.step() > spec_.steps()) {
      return absl::DataLossError(absl::StrCat("the job's newest checkpoint '", checkpoint.folder,
                                              "' says step ", checkpoint.manifest.step(),
                                              ", outside 0..", spec_.steps(), " (job.steps)"));
    }
    first_step_ = checkpoint.manifest.step();
    result_.resumed_from_step = first_step_;
    result_.steps = first_step_;  // the job's steps, as each step counts them
    // The loss scale goes on from where the job was (not from init_scale).
    if (scaler_.enabled()) {
      if (const absl::Status restored = scaler_.Restore(checkpoint.manifest.grad_scaler());
          !restored.ok()) {
        return absl::DataLossError(absl::StrCat("the job's newest checkpoint '", checkpoint.folder,
                                                "': ", restored.message()));
      }
    }
  }
  // Optimizer state carries over only to an optimizer of the same kind.
  if (checkpoint.manifest.optimizer() != fsdp::OptimizerKind(spec_.optimizer())) {
    return absl::OkStatus();
  }
  optimizer_->set_steps(checkpoint.manifest.optimizer_steps());
  for (int u = 0; u < static_cast<int>(checkpoint.optimizer_state.size()); ++u) {
    for (const auto& [name, shard] : checkpoint.optimizer_state[u]) {
      // Read for plan_ (CheckpointToLoad), which the model was built for.
      if (static_cast<int64_t>(shard.size()) != model_->shard_numel(u)) {
        return absl::InternalError(absl::StrCat("checkpoint state ", name, " of unit ", u, ": ",
                                                shard.size(), " elements for a shard of ",
                                                model_->shard_numel(u)));
      }
      RETURN_IF_ERROR(optimizer_->RestoreSegmentState(u, name, shard.data(), shard.size()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingResult> RankTrainer::Run() {
  absl::StatusOr<TrainingResult> result;
  try {
    result = Body();
  } catch (const std::bad_alloc& failure) {
    result = AllocationFailureStatus(failure, activity_);
  }
  if (result.ok()) {
    result->device_memory = ReleaseModel();
  } else if (runtime_ != nullptr) {
    // Before the model's threads end: they wait for their collectives in flight, which a
    // lost peer would hold until their deadline.
    runtime_->AbortAcceleratorCollectives(result.status());
  }
  return result;
}

MemoryStats RankTrainer::ReleaseModel() {
  losses_.reset();
  model_.reset();
  optimizer_.reset();
  data_.reset();
  stream_clock_.reset();
  return runtime_->device()->allocator()->Stats();
}

absl::StatusOr<TrainingResult> RankTrainer::Body() {
  RETURN_IF_ERROR(Setup());
  if (context_.on_steps_started) context_.on_steps_started();
  TrainingThreadMark mark;
  calls_before_training_ = training_thread_coordinator_calls.load();
  speed_.emplace(Clock::Real().Now(), first_step_);
  while (true) {
    while (next_ != AfterSteps::kNextStep || result_.steps < spec_.steps()) {
      const absl::Time start = Clock::Real().Now();
      if (absl::Status done = RunToTheEndOfAStep(); !done.ok()) {
        if (!moves_.Recoverable(done)) return done;
        RETURN_IF_ERROR(RecoverFrom(done));
        continue;  // from the part every rank agreed on
      }
      // Not after the evaluation before the first step.
      if (result_.steps > first_step_)
        ReportProgress(absl::ToDoubleSeconds(Clock::Real().Now() - start));
      if (moves_.MovesAfterStep()) RETURN_IF_ERROR(moves_.Regroup(result_.steps));
    }
    activity_ = "gathering the final model";
    if (context_.position != nullptr) context_.position->SetPhase("final model");
    absl::Status written = WriteFinalModel();
    // No rank completes before the model is written: the groups but the leader's gather
    // without it, and had completed as followers when it was lost, leaving no model.
    if (written.ok()) {
      written = BarrierAfterWriting(FinalModelBytes());
    }
    if (written.ok()) return result_;
    // A peer lost while the model is gathered or written: the live ranks gather it again
    // in the next epoch, the lowest writing it, after any part a rank had not finished.
    if (!moves_.Recoverable(written)) return written;
    RETURN_IF_ERROR(RecoverFrom(written));
  }
}

absl::Status RankTrainer::RunToTheEndOfAStep() {
  if (next_ == AfterSteps::kNextStep) {
    activity_ = absl::StrCat("training step ", result_.steps);
    ScopedSpan step_span(context_.timeline, "step", -1, result_.steps);
    RETURN_IF_ERROR(Step(result_.steps));  // next_ is kCheckpoint once it committed
  }
  if (next_ == AfterSteps::kCheckpoint) {
    ASSIGN_OR_RETURN(const bool written, MaybeCheckpoint());
    if (written) RETURN_IF_ERROR(hooks_->AfterPart(result_.steps, "checkpoint"));
    next_ = AfterSteps::kEvaluation;
  }
  if (next_ == AfterSteps::kEvaluation) {
    ASSIGN_OR_RETURN(const bool evaluated, MaybeEvaluate(result_.steps));
    if (evaluated) RETURN_IF_ERROR(hooks_->AfterPart(result_.steps, "evaluation"));
    next_ = AfterSteps::kNextStep;
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::RecoverFrom(const absl::Status& failure) {
  const absl::Time failed_at = Clock::Real().Now();
  const std::string failed = absl::StrCat(activity_, " failed (", failure.message(), ")");
  activity_ = "recovering from a lost peer";
  RETURN_IF_ERROR(moves_.Recover(failure));
  LogWarning(LogContext().Job(context_.job_id).Attempt(context_.attempt).Rank(context_.rank),
             absl::StrCat(failed, "; membership epoch ", moves_.epoch(), ": ", LiveRanks(),
                          " ranks train on from ", WhatComesNext(), " after ",
                          absl::FormatDuration(Clock::Real().Now() - failed_at)));
  return absl::OkStatus();
}

std::string RankTrainer::WhatComesNext() const {
  const int64_t steps = result_.steps;
  if (next_ == AfterSteps::kCheckpoint && CheckpointDue()) {
    return absl::StrCat("the checkpoint after step ", steps - 1);
  }
  if (next_ != AfterSteps::kNextStep && EvaluationDue(steps)) return EvaluationName(steps);
  if (steps == spec_.steps()) return "the final model";
  return absl::StrCat("step ", steps);
}

std::string RankTrainer::EvaluationName(int64_t steps_done) const {
  return steps_done == first_step_ ? std::string("the evaluation before the first step")
                                   : absl::StrCat("the evaluation after step ", steps_done - 1);
}

absl::Status RankTrainer::Step(int64_t step) {
  RETURN_IF_ERROR(BeginStep(step));
  // The scale the micro-steps ran with, before the scaler's update.
  const double loss_scale = scaler_.scale();
  RETURN_IF_ERROR(AccumulateGradients(step));
  losses_->EndStep(step, loss_scale);
  if (context_.position != nullptr) context_.position->SetPhase("step end");
  ASSIGN_OR_RETURN(const bool skip, UnscaleGradients(step));
  if (FaultTolerant()) RETURN_IF_ERROR(CommitVote(step));
  if (skip) {
    model_->DiscardGradients();
  } else {
    RETURN_IF_ERROR(model_->OptimizerStep(*optimizer_, spec_.optimizer().max_grad_norm()));
  }
  result_.steps = step + 1;
  next_ = AfterSteps::kCheckpoint;
  // Ranks leaving read their losses with the others before they go.
  if (LossReadDue(spec_, result_.steps, losses_->size()) || moves_.MovesAfterStep()) {
    RETURN_IF_ERROR(AgreeOnLossesAndPlan());
  }
  MeasureSpeed();
  return absl::OkStatus();
}

absl::Status RankTrainer::CommitVote(int64_t step) {
  // Two slots per live rank: 1 ready (2: and leaving with its group after this step), and
  // the newest membership epoch it holds.
  Communicator& world = *runtime_->world();
  const int size = world.size();
  std::vector<float> votes(static_cast<size_t>(2) * size, 0.0f);
  votes[world.rank()] = moves_.ReadyVote(step);
  votes[size + world.rank()] = moves_.EpochVote();
  if (context_.position != nullptr) context_.position->SetPhase("commit vote");
  RETURN_IF_ERROR(world.AllReduce(votes.data(), votes.size()));
  moves_.Tally(votes, size);
  // Idle now: the step's reductions are done, the next all-gathers not begun. Over host
  // memory: the vote is a host float, whatever the device.
  Communicator* shard_group = runtime_->host_shard_group();
  if (shard_group->size() == 1) return absl::OkStatus();
  float ready = 1.0f;
  return shard_group->AllReduce(&ready, 1);
}

void RankTrainer::CoverLeftRanks() {
  covered_data_.clear();
  for (int32_t rank : CoveredRanks(spec_, moves_.live_ranks(), context_.rank)) {
    covered_data_.push_back(data_->ForRank(rank));
  }
}

absl::StatusOr<RankState> RankTrainer::CaptureState() {
  RankState state;
  for (int u = 0; u < model_->num_units(); ++u) {
    ASSIGN_OR_RETURN(std::vector<float> shard, model_->ShardToHost(u));
    state.shards.push_back(std::move(shard));
    state.optimizer.emplace_back();
    for (const auto& [name, buffer] : optimizer_->SegmentState(u)) {
      std::vector<float> values(buffer->numel());
      RETURN_IF_ERROR(runtime_->device()->CopyToHost(values.data(), buffer->data(),
                                                     values.size() * sizeof(float)));
      state.optimizer.back().emplace_back(name, std::move(values));
    }
  }
  state.optimizer_steps = static_cast<double>(optimizer_->steps());
  state.steps = static_cast<double>(result_.steps);
  state.next = next_;
  state.scaler = scaler_.State();
  return state;
}

absl::StatusOr<RankState> RankTrainer::EmptyState() const {
  ASSIGN_OR_RETURN(const fsdp::FlatLayout layout,
                   fsdp::BuildFlatLayout(spec_.model(), spec_.wrap()));
  RankState state;
  for (const fsdp::UnitLayout& unit : layout.units) {
    state.shards.emplace_back(fsdp::PaddedNumel(unit.numel, plan_.shard_size) / plan_.shard_size);
  }
  state.optimizer.resize(state.shards.size());
  state.steps = -1;  // behind every live rank: the heal sends this rank everything
  state.scaler = scaler_.State();
  return state;
}

absl::Status RankTrainer::TakeStateOfTheLiveRanks() {
  activity_ = "taking its state from the live ranks";
  // Its place in its shard group is the one it has in the job's whole world: groups leave
  // and join whole, so every epoch keeps it.
  ASSIGN_OR_RETURN(plan_, fsdp::PlanSharding(spec_.fsdp(), JobRanks(spec_), context_.rank));
  ASSIGN_OR_RETURN(RankState state, EmptyState());
  RETURN_IF_ERROR(moves_.Join(std::move(state)));
  first_step_ = result_.steps;
  LogInfo(LogContext().Job(context_.job_id).Attempt(context_.attempt).Rank(context_.rank),
          absl::StrCat("joined membership epoch ", moves_.epoch(), " at step ", first_step_, " (",
                       LiveRanks(), " ranks), its shards from the live ranks"));
  return absl::OkStatus();
}

absl::Status RankTrainer::RestoreState(const RankState& state) {
  ASSIGN_OR_RETURN(auto model,
                   fsdp::FsdpModel::CreateFromShards(spec_, plan_, runtime_->model_groups(),
                                                     runtime_->device(), state.shards));
  AdoptModel(std::move(model));
  optimizer_->set_steps(static_cast<int64_t>(state.optimizer_steps));
  for (int u = 0; u < static_cast<int>(state.optimizer.size()); ++u) {
    for (const auto& [name, shard] : state.optimizer[u]) {
      RETURN_IF_ERROR(optimizer_->RestoreSegmentState(u, name, shard.data(), shard.size()));
    }
  }
  result_.steps = static_cast<int64_t>(state.steps);
  next_ = state.next;
  if (scaler_.enabled()) RETURN_IF_ERROR(scaler_.Restore(state.scaler));
  AttachStreamClock();  // the new device's streams
  return absl::OkStatus();
}

bool RankTrainer::CloseRuntimeConnections() {
  if (runtime_ == nullptr) return false;
  runtime_->CloseConnections();  // the world's and every group's
  return true;
}

void RankTrainer::AttachStreamClock() {
  if (context_.timeline != nullptr && runtime_->device()->stream_clock() != nullptr) {
    stream_clock_ = std::make_unique<StreamClockAttachment>(context_.timeline,
                                                            runtime_->device()->stream_clock());
  }
}

void RankTrainer::ReleaseRuntime() {
  // Its traffic stays in the attempt's totals (the progress reports them: a counter
  // that went back at each membership epoch would read as a reset).
  if (runtime_ != nullptr) {
    earlier_traffic_ += runtime_->Traffic();
    const MemoryStats memory = runtime_->device()->allocator()->Stats();
    earlier_peak_allocated_ = std::max(earlier_peak_allocated_, memory.peak_live_bytes);
    earlier_peak_reserved_ = std::max(earlier_peak_reserved_, memory.peak_reserved_bytes);
  }
  // The model's threads end (their collectives failed), then the groups.
  losses_.reset();
  model_.reset();
  optimizer_.reset();
  stream_clock_.reset();
  runtime_.reset();
}

absl::Status RankTrainer::ConnectRuntime(const TrainingContext& epoch_context) {
  ASSIGN_OR_RETURN(fsdp::ShardingPlan plan,
                   fsdp::PlanSharding(spec_.fsdp(), epoch_context.world_size, epoch_context.rank));
  // Groups leave whole, so every rank keeps its place in its shard group, and its shards.
  if (plan.shard_size != plan_.shard_size || plan.shard_rank != plan_.shard_rank) {
    return absl::InternalError(absl::StrCat(
        "epoch ", moves_.epoch(), " moves rank ", context_.rank, " from shard ", plan_.shard_rank,
        " of ", plan_.shard_size, " to shard ", plan.shard_rank, " of ", plan.shard_size));
  }
  plan_ = plan;
  CoverLeftRanks();
  ASSIGN_OR_RETURN(runtime_, RankRuntime::Connect(spec_, plan_, epoch_context));
  runtime_->SetPeerTimeout(moves_.PeerTimeout());
  return absl::OkStatus();
}

void RankTrainer::MeasureSpeed() {
  speed_->StepEnded(Clock::Real().Now(), result_.steps);
  result_.steps_per_second = speed_->steps_per_second();
  result_.tokens_per_second = speed_->tokens_per_second(data_->tokens_per_step());
}

absl::Status RankTrainer::BeginStep(int64_t step) {
  if (context_.abort != nullptr && context_.abort->load()) {
    return absl::AbortedError(absl::StrCat("aborted at step ", step));
  }
  if (context_.position != nullptr) {
    context_.position->SetStep(step);
    context_.position->SetPhase("step start");
  }
  if (context_.hook_schedule != nullptr) {
    ASSIGN_OR_RETURN(std::optional<v1::CommHook> hook,
                     context_.hook_schedule->HookForStep(step, context_.abort));
    model_->set_comm_hook(hook.value_or(spec_.comm_hook()));
  }
  lr_ = fsdp::ScheduledLearningRate(spec_.optimizer(), step, spec_.steps());
  optimizer_->set_lr(lr_);
  return absl::OkStatus();
}

absl::Status RankTrainer::AccumulateGradients(int64_t step) {
  const int per_source = std::max(1, spec_.gradient_accumulation_steps());
  const int micro_steps = MicroStepsPerStep();
  // Each micro-batch weighs 1/A of its rows' rank; the loss scaler multiplies the loss
  // (and so every gradient) by its scale. Under KEEP_GLOBAL the live ranks' mean is over
  // every rank's rows: the reduction divides by the live ranks, each batch weighs
  // live/world more so that the sum is divided by the world (docs/semantics.md).
  const float loss_scale = (1.0f / per_source) * BatchWeight() * scaler_.scale();
  for (int micro = 0; micro < micro_steps; ++micro) {
    // The rank's own micro-batches, then those of the ranks it covers, rank by rank.
    const BatchSource& source =
        micro < per_source ? *data_ : *covered_data_[micro / per_source - 1];
    ASSIGN_OR_RETURN(MicroBatch batch, source.Train(step, micro % per_source));
    hooks_->OnMicroBatch(step, micro, &batch);
    RETURN_IF_ERROR(
        model_->ForwardBackward(batch, loss_scale, micro == micro_steps - 1, losses_->Slot(micro)));
    ObserveExecutionOrder(step);
  }
  return absl::OkStatus();
}

// Reports the first micro-step's order, and once a later one that differs from it.
void RankTrainer::ObserveExecutionOrder(int64_t step) {
  v1::ExecutionOrder order = model_->execution_order();
  hooks_->AlterExecutionOrder(step, &order);
  if (!first_order_.has_value()) {
    first_order_ = order;
    if (context_.on_execution_order) context_.on_execution_order(order, step, false);
  } else if (!order_change_reported_ &&
             !google::protobuf::util::MessageDifferencer::Equals(order, *first_order_)) {
    order_change_reported_ = true;
    if (context_.on_execution_order) context_.on_execution_order(order, step, true);
  }
}

// Unscale before clipping; the found-inf flag is all-reduced so every rank skips the
// same steps.
absl::StatusOr<bool> RankTrainer::UnscaleGradients(int64_t step) {
  const bool skip = hooks_->SkipStep(step);
  if (!scaler_.enabled()) return skip;
  ASSIGN_OR_RETURN(const bool overflow, model_->UnscaleGradients(scaler_.inverse_scale()));
  float found_inf = overflow ? 1.0f : 0.0f;
  RETURN_IF_ERROR(runtime_->world()->AllReduce(&found_inf, 1));
  scaler_.Update(found_inf > 0);
  return skip || found_inf > 0;
}

absl::Status RankTrainer::AgreeOnLossesAndPlan() {
  ASSIGN_OR_RETURN(const std::vector<PendingLosses::StepLoss> losses, losses_->Take());
  const int32_t plan_version =
      model_->prefetch_plan().has_value() ? model_->prefetch_plan()->version() : 0;
  const std::optional<v1::PrefetchPlan> newer_plan =
      context_.plans != nullptr ? context_.plans->NewerThan(plan_version) : std::nullopt;
  // One all-reduce of {loss, vote} per step, the vote in the last: the order in which an
  // all-reduce adds the ranks' values may depend on an element's position, so each loss
  // goes first, as it did when the ranks agreed after every step: the same bits.
  for (size_t i = 0; i < losses.size(); ++i) {
    const int64_t step = losses[i].step;
    const bool last = i + 1 == losses.size();
    float reduced[2] = {static_cast<float>(losses[i].local_loss),
                        last && newer_plan.has_value() ? 1.0f : 0.0f};
    RETURN_IF_ERROR(runtime_->world()->AllReduce(reduced, 2));
    const double loss = reduced[0] / static_cast<float>(LiveRanks());
    // Every rank sees the same reduced loss, so all fail at this step alike (and stop
    // reducing at the same one). With a loss scaler, an overflow is the scaler's to handle
    // (it skipped the step).
    if (!std::isfinite(loss) && !scaler_.enabled()) {
      return MarkPermanent(absl::FailedPreconditionError(absl::StrFormat(
          "training diverged: the loss of step %d is %g (not finite); lower the learning "
          "rate, clip gradients (optimizer.max_grad_norm) or scale the loss (grad_scaler)",
          step, loss)));
    }
    if (step == first_step_) result_.first_loss = loss;
    result_.last_loss = loss;
    loss_step_ = step + 1;
    if (last && newer_plan.has_value() && reduced[1] == static_cast<float>(LiveRanks())) {
      RETURN_IF_ERROR(model_->set_prefetch_plan(*newer_plan));
      plan_since_step_ = result_.steps;  // the next step's index
    }
  }
  return absl::OkStatus();
}

bool RankTrainer::CheckpointDue() const {
  const int64_t interval = spec_.output().checkpoint_interval_steps();
  return interval > 0 && result_.steps % interval == 0;
}

absl::StatusOr<bool> RankTrainer::MaybeCheckpoint() {
  if (!CheckpointDue()) return false;
  activity_ = absl::StrCat("writing the checkpoint after step ", result_.steps - 1);
  if (context_.position != nullptr) context_.position->SetPhase("checkpoint");
  const std::string& dir = spec_.output().checkpoint_dir();
  const fsdp::CheckpointAuthor author{context_.job_id, context_.attempt, context_.job_uid};
  RETURN_IF_ERROR(fsdp::WriteCheckpointShard(dir, result_.steps, author, *model_, *optimizer_));
  // Every shard is on disk before the manifest; writing one may take longer than a peer
  // is waited for inside a step, and longer than the data plane's timeout for a large one.
  RETURN_IF_ERROR(BarrierAfterWriting(fsdp::CheckpointShardBytes(*model_, *optimizer_)));
  if (Leads()) {
    const v1::GradScalerState scaler_state = scaler_.State();
    RETURN_IF_ERROR(fsdp::WriteCheckpointManifest(dir, result_.steps, author, spec_, *model_,
                                                  *optimizer_,
                                                  scaler_.enabled() ? &scaler_state : nullptr));
    if (pruner_ == nullptr) {
      pruner_ = std::make_unique<CheckpointPruner>(dir, author, spec_.output().keep_checkpoints());
    }
    pruner_->After(result_.steps);
  }
  // No rank is past the checkpoint before its manifest is written: a leader lost after
  // the shards' barrier would otherwise leave the step without one, while the others had
  // gone on (AgreedNext would not have them write it again).
  RETURN_IF_ERROR(BarrierWithDataPlaneTimeout());
  // Written again after a recovery (AgreedNext): one checkpoint still.
  if (checkpointed_steps_ != result_.steps) ++result_.checkpoints_written;
  checkpointed_steps_ = result_.steps;
  return true;
}

// Before the first step and every evaluation.interval_steps steps (when the interval is
// set), and after the last.
bool RankTrainer::EvaluationDue(int64_t steps_done) const {
  if (!data_->has_validation()) return false;
  const int64_t interval = spec_.evaluation().interval_steps();
  return steps_done == spec_.steps() ||
         (interval > 0 && (steps_done == first_step_ || steps_done % interval == 0));
}

absl::StatusOr<bool> RankTrainer::MaybeEvaluate(int64_t steps_done) {
  if (!EvaluationDue(steps_done)) return false;
  activity_ = EvaluationName(steps_done);
  if (context_.position != nullptr) context_.position->SetPhase("evaluation");
  ScopedSpan span(context_.timeline, "evaluation", -1, steps_done);
  ASSIGN_OR_RETURN(const double loss, Evaluate());
  // Evaluated again after a recovery (AgreedNext): the live ranks' loss is the one kept.
  if (result_.first_val_loss < 0 || result_.first_val_loss_step == steps_done) {
    result_.first_val_loss = loss;
    result_.first_val_loss_step = steps_done;
  }
  result_.last_val_loss = loss;
  result_.last_val_loss_step = steps_done;
  return true;
}

// The mean loss over evaluation.batches global batches of the validation file: each rank
// its part, micro-step by micro-step, then the ranks' means averaged.
absl::StatusOr<double> RankTrainer::Evaluate() {
  const int micro_steps = std::max(1, spec_.gradient_accumulation_steps());
  const int batches =
      spec_.evaluation().batches() > 0 ? spec_.evaluation().batches() : kDefaultEvalBatches;
  std::vector<const BatchSource*> sources = {data_.get()};
  for (const auto& covered : covered_data_) sources.push_back(covered.get());
  double sum = 0;
  for (const BatchSource* source : sources) {
    for (int k = 0; k < batches; ++k) {
      for (int micro = 0; micro < micro_steps; ++micro) {
        ASSIGN_OR_RETURN(const MicroBatch batch, source->Validation(k, micro));
        ASSIGN_OR_RETURN(const double loss, model_->Evaluate(batch));
        sum += loss;
      }
    }
  }
  // Each rank's rows once: the live ranks', and under KEEP_GLOBAL those they cover.
  float mean = static_cast<float>(sum / (batches * micro_steps));
  RETURN_IF_ERROR(runtime_->world()->AllReduce(&mean, 1));
  return mean / (KeepsGlobalBatch() ? JobRanks(spec_) : LiveRanks());
}

void RankTrainer::ReportProgress(double step_seconds) {
  if (!context_.on_progress) return;
  v1::Progress progress;
  progress.set_step(result_.steps);
  progress.set_total_steps(spec_.steps());
  progress.set_loss(result_.last_loss);
  progress.set_loss_step(loss_step_);
  progress.set_first_loss(result_.first_loss);
  progress.set_steps_per_second(result_.steps_per_second);
  progress.set_tokens_per_second(result_.tokens_per_second);
  progress.set_learning_rate(lr_);
  if (result_.last_val_loss_step >= 0) {
    progress.set_val_loss(result_.last_val_loss);
    progress.set_first_val_loss(result_.first_val_loss);
    progress.set_val_loss_step(result_.last_val_loss_step);
    progress.set_first_val_loss_step(result_.first_val_loss_step);
  }
  progress.set_phase("training");
  progress.set_step_seconds(step_seconds);
  if (init_checkpoint_step_.has_value()) progress.set_init_checkpoint_step(*init_checkpoint_step_);
  // The job's newest checkpoint this rank knows complete, written or else resumed from: the
  // coordinator tells later attempts (Job.checkpoint_step).
  const int64_t checkpoint =
      checkpointed_steps_ >= 0 ? checkpointed_steps_ : result_.resumed_from_step;
  if (checkpoint >= 0) progress.set_checkpoint_step(checkpoint);
  CommStats bytes = earlier_traffic_;
  bytes += runtime_->Traffic();
  progress.set_all_gather_bytes(bytes.all_gather_bytes);
  progress.set_reduce_scatter_bytes(bytes.reduce_scatter_bytes);
  progress.set_all_reduce_bytes(bytes.all_reduce_bytes);
  ReportPeakMemory(&progress);
  if (scaler_.enabled()) *progress.mutable_grad_scaler() = scaler_.State();
  *progress.mutable_comm_hook() = model_->comm_hook();
  if (model_->prefetch_plan().has_value()) {
    progress.set_prefetch_plan_version(model_->prefetch_plan()->version());
    progress.set_prefetch_plan_since_step(plan_since_step_);
  }
  const int64_t calls = training_thread_coordinator_calls.load();
  if (calls_after_first_step_ < 0) calls_after_first_step_ = calls;
  progress.set_first_step_coordinator_calls(calls_after_first_step_ - calls_before_training_);
  progress.set_critical_path_coordinator_calls(calls - calls_after_first_step_);
  context_.on_progress(progress);
}

void RankTrainer::ReportPeakMemory(v1::Progress* progress) const {
  const MemoryStats memory = runtime_->device()->allocator()->Stats();
  progress->set_peak_allocated_bytes(std::max(earlier_peak_allocated_, memory.peak_live_bytes));
  progress->set_peak_reserved_bytes(std::max(earlier_peak_reserved_, memory.peak_reserved_bytes));
}

uint64_t RankTrainer::FinalModelBytes() const {
  uint64_t parameters = 0;
  for (int u = 0; u < model_->num_units(); ++u) {
    parameters += static_cast<uint64_t>(model_->unit_numel(u));
  }
  const int files = (spec_.output().final_model_path().empty() ? 0 : 1) +
                    (spec_.output().huggingface_dir().empty() ? 0 : 1);
  return parameters * sizeof(float) * files;
}

// The final model's parameters as its file holds them: F32, by state-dict name, in the
// file's (the map's) order.
TensorLayouts RankTrainer::FinalModelLayouts() const {
  TensorLayouts layouts;
  for (const ParameterDesc& param : model_->layout().model.params) {
    layouts[param.name] = {"F32", param.shape,
                           static_cast<uint64_t>(param.numel()) * sizeof(float)};
  }
  return layouts;
}

// Every rank reads the gathered model (a unit at a time, fsdp::FullModelStream: the
// all-gathers are collectives) for each output, in the same order: the Hugging Face export,
// then the file. Rank 0 writes them, between its all-gathers: the others wait in each for
// as long as it writes, so the groups wait the data plane's timeout plus the writes at
// WriteAllowance's pace meanwhile, as the barrier after them does.
absl::Status RankTrainer::WriteFinalModel() {
  const std::chrono::milliseconds allowance = WriteAllowance(FinalModelBytes());
  runtime_->SetPeerTimeout(moves_.PeerTimeout() + allowance);
  runtime_->SetAcceleratorTimeout(context_.data_plane.timeout + allowance);
  absl::Status written = WriteFinalModelStreams();
  runtime_->SetPeerTimeout(moves_.PeerTimeout());
  runtime_->SetAcceleratorTimeout(context_.data_plane.timeout);
  return written;
}

// A leader that stopped early (a refusal, a full disk) makes the gathers it had left, as
// the followers make them all; after a failed gather (a peer lost) no rank makes more.
absl::Status RankTrainer::WriteFinalModelStreams() {
  std::optional<fsdp::FullModelStream> exported, file;
  if (!spec_.output().huggingface_dir().empty()) {
    ASSIGN_OR_RETURN(const std::vector<std::string> order, HuggingFaceWriteOrder(spec_.model()));
    ASSIGN_OR_RETURN(exported, fsdp::FullModelStream::Make(model_.get(), order, Leads()));
  }
  if (!spec_.output().final_model_path().empty()) {
    std::vector<std::string> order;
    for (const auto& [name, layout] : FinalModelLayouts()) order.push_back(name);
    ASSIGN_OR_RETURN(file, fsdp::FullModelStream::Make(model_.get(), order, Leads()));
  }
  absl::Status written = Leads() ? WriteFinalModelFiles(exported, file) : absl::OkStatus();
  for (std::optional<fsdp::FullModelStream>* stream : {&exported, &file}) {
    if (!stream->has_value()) continue;
    const absl::Status finished = (*stream)->Finish();
    if (!finished.ok()) return written.ok() ? finished : written;
  }
  return written;
}

// The leader's part of WriteFinalModel.
absl::Status RankTrainer::WriteFinalModelFiles(std::optional<fsdp::FullModelStream>& exported,
                                               std::optional<fsdp::FullModelStream>& file) {
  result_.led = true;
  const std::string& path = spec_.output().final_model_path();
  const std::string& huggingface_dir = spec_.output().huggingface_dir();
  // Before anything is written: a later attempt's model is never replaced.
  for (const std::string& model :
       {path, huggingface_dir.empty() ? std::string() : huggingface_dir + "/model.safetensors"}) {
    RETURN_IF_ERROR(CheckNotSuperseded(model, context_.job(), context_.attempt));
  }
  if (exported.has_value()) {
    RETURN_IF_ERROR(
        PermanentIfTaken(ExportHuggingFace(
                             spec_, [&](const std::string& param) { return exported->Next(param); },
                             context_.job(), context_.attempt),
                         huggingface_dir + "/model.safetensors", context_.job()));
  }
  if (!file.has_value()) return absl::OkStatus();
  RETURN_IF_ERROR(WriteFinalModelFile(*file));
  result_.model_path = path;
  return absl::OkStatus();
}

// output.final_model_path, from `file`, with the model's spec in its metadata
// ("shardwise.model", JSON), so the file alone can be sampled from, and the job's id
// ("shardwise.job", final_model_owner.h).
absl::Status RankTrainer::WriteFinalModelFile(fsdp::FullModelStream& file) {
  const std::string& path = spec_.output().final_model_path();
  RETURN_IF_ERROR(CreateFolders(std::filesystem::path(path).parent_path().string()));
  std::string model_json;
  (void)google::protobuf::util::MessageToJsonString(spec_.model(), &model_json);
  // The tokenizer goes with the model, so that the pair alone can be sampled from; first,
  // so that a model naming this job exists only once its tokenizer does. Files a person
  // put there are replaced only when the spec says so (identical ones, an earlier
  // attempt's, are left as they are).
  const std::string& tokenizer_dir = spec_.data().tokens().tokenizer();
  if (!tokenizer_dir.empty()) {
    RETURN_IF_ERROR(PermanentIfTaken(
        tokenizer::CopyTokenizerFolder(tokenizer_dir, tokenizer::ModelTokenizerFolder(path),
                                       spec_.output().overwrite(), kCheckedPathLinks),
        path, context_.job()));
  }
  Metadata metadata = WriterMetadata(context_.job(), context_.attempt);
  metadata["shardwise.model"] = model_json;
  // A file there that the job did not write is replaced only when the spec says so; one
  // an earlier attempt of this job wrote is its own (final_model_owner.h).
  const bool replace = spec_.output().overwrite() || WrittenByJob(path, context_.job());
  absl::Status written = WriteSafetensorsStreamed(
      path, FinalModelLayouts(), metadata,
      [&](const std::string& name, FileAppender& out) -> absl::Status {
        ASSIGN_OR_RETURN(const HostTensor tensor, file.Next(name));
        return out.Append(tensor.bytes);
      },
      replace);
  // Put there since the check by this job's leader of a membership before: its model.
  if (absl::IsAlreadyExists(written) && WrittenByJob(path, context_.job())) {
    written = absl::OkStatus();
  }
  return PermanentIfTaken(written, path, context_.job());
}

}  // namespace

std::string TrainingResult::Summary() const {
  // An attempt that resumed from the last step's checkpoint trained none: no loss, no speed.
  std::string summary = resumed_from_step == steps
                            ? absl::StrFormat("trained %d steps, all before this attempt", steps)
                            : absl::StrFormat("trained %d steps: loss %.4f -> %.4f, %.2f steps/s",
                                              steps, first_loss, last_loss, steps_per_second);
  if (tokens_per_second > 0)
    absl::StrAppend(&summary, absl::StrFormat(", %.0f tokens/s", tokens_per_second));
  if (last_val_loss >= 0) {
    absl::StrAppend(
        &summary, "; validation loss ",
        ValidationLossText(first_val_loss, first_val_loss_step, last_val_loss, last_val_loss_step));
  }
  if (resumed_from_step >= 0) {
    absl::StrAppend(&summary, "; resumed from the checkpoint of step ", resumed_from_step);
  }
  if (checkpoints_written > 0) absl::StrAppend(&summary, "; ", checkpoints_written, " checkpoints");
  if (!model_path.empty()) absl::StrAppend(&summary, "; model written to ", model_path);
  return summary;
}

absl::StatusOr<TrainingResult> Train(const v1::JobSpec& spec, const TrainingContext& context,
                                     TrainingHooks* hooks) {
  return RankTrainer(spec, context, hooks).Run();
}

}  // namespace shardwise
