#ifndef SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_
#define SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_

// The FSDP runtime on one rank, for any model of the model layer (worker/model/): flat
// parameters per unit (contracts/fsdp_layout.h), sharded over the shard group; unshard (all-gather)
// and reshard (free) in FSDP's order around the model's stages; gradient reduction
// (gradient_reducer.h) into the saved gradient shards; the optimizer on the FP32 shards.
// It never knows which model it runs: it sees parameters, units and stages.
// docs/semantics.md states the orders; docs/architecture.md maps them here.
//
// A micro-step: the root unshards first (its pre-forward: it wraps the model) and stays
// unsharded until its post-backward; each child unit unshards at its first stage
// (pre-forward) and, if the strategy says so, reshards after its last (post-forward).
// Backward runs the stages in reverse: a unit's pre-backward comes before its last
// stage's backward (unshard again, allocate the unsharded gradient), its post-backward
// after its first stage's (round the gradient to param_dtype, reshard, queue the
// reduction). A GPT's root runs the embeddings first and the head last, so its
// post-backward, and its reduction, come at the very end, after the tied weight's
// gradient has summed both uses.
//
// With mixed precision (fsdp.mixed_precision) the all-gather moves param_dtype (a
// low-precision copy of the shard is made before it and freed after), stages compute on
// parameters rounded to param_dtype, gradients are reduced in reduce_dtype, and the
// optimizer sees FP32 gradients on the FP32 master shards.
//
// Collectives run on the model's communication threads (comm_thread.h), as FSDP's run on
// its unshard and post-backward streams: all-gathers on one (over the shard group's
// second connection, groups.unshard), issued early as the prefetch plan says; reductions
// on the other. Each thread runs its collectives in the order the training thread queues
// them, the same on every rank, and each has its own communicators, so the ranks'
// collectives pair up whatever the timing. Where collectives return once enqueued
// (NCCL's), the two threads also launch in the order the training thread queued across
// both (launch_order.h): NCCL's kernels wait for their peers, and two communicators'
// collectives launched in different orders on two ranks could wait for each other. With
// limit_all_gathers, an unshard first waits until at most one earlier reshard's free is still
// pending on the device (all_gather_limiter.h; on the CPU frees complete at once).
//
// One training step: ForwardBackward once per micro-step (sync only on the last), then
// OptimizerStep (or, after an overflow found by the loss scaler, DiscardGradients).
// Out-of-order use fails with INTERNAL naming the unit and phase.
//
// Buffers live on the model's Device and all arithmetic goes through it; the training
// thread works on the compute stream, the communication threads on theirs.
//
// Thread-safety: an FsdpModel is used by one training thread. The threads it starts
// touch units only across the hand-offs flat_unit.h describes: the unshard thread fills
// `full`; the reduction thread adds into `shard_grad` and, with an optimizer in backward,
// steps `shard`; an upcast thread (DDP's mixed-precision hook, NO_SHARD only) adds into
// `shard_grad` and runs Reshard, which frees `full` (never the all-gather limiter: it
// serves sharded strategies only). Their shared bookkeeping is GradientReducer's, under
// its mutex.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "contracts/safetensors.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/comm_thread.h"
#include "worker/comm/communicator.h"
#include "worker/comm/launch_order.h"
#include "worker/compute/device.h"
#include "worker/data/batch.h"
#include "worker/fsdp/comm_hooks.h"
#include "worker/fsdp/flat_unit.h"
#include "worker/fsdp/gradient_reducer.h"
#include "worker/fsdp/optimizer.h"
#include "worker/fsdp/optimizer_ranges.h"
#include "worker/model/model.h"
#include "worker/runtime/all_gather_limiter.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/timeline.h"

namespace shardwise::fsdp {

class FsdpModel {
 public:
  // `initial` holds the full model by state-dict names; each rank keeps its shards.
  static absl::StatusOr<std::unique_ptr<FsdpModel>> Create(const v1::JobSpec& spec,
                                                           const ShardingPlan& plan, Groups groups,
                                                           Device* device,
                                                           const TensorMap& initial);
  // As Create, from this rank's own shards instead of the full model: `shards[u]` is unit
  // u's shard as ShardToHost returned it, on a rank whose shard layout (shard group size
  // and position) is the same. A rank rebuilding over new groups keeps its shards so; a
  // rank starting reads or assembles only its own (checkpoint.h, shard_assembler.h).
  static absl::StatusOr<std::unique_ptr<FsdpModel>> CreateFromShards(
      const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups, Device* device,
      const std::vector<std::vector<float>>& shards);
  ~FsdpModel();

  // One micro-step on `batch`: forward, loss (scaled by `loss_scale`, e.g. 1/A for A
  // accumulation micro-steps), backward. With `sync`, gradients are reduced into the
  // gradient shards; without, they accumulate unsharded (no_sync). The scaled local loss
  // goes to `loss`, one double of the device's memory, which nothing waits for: the caller
  // reads it when it needs it (the trainer's PendingLosses).
  absl::Status ForwardBackward(const MicroBatch& batch, float loss_scale, bool sync, double* loss);
  // The loss of `batch` without gradients (evaluation): units unshard as in a forward and
  // all reshard after it. Not recorded as an execution order. Between steps only.
  absl::StatusOr<double> Evaluate(const MicroBatch& batch);

  // Clips by global norm (when max_grad_norm > 0), steps the optimizer on every shard
  // (but the ranges already stepped in backward), and zeroes the gradient shards. The
  // norm stays on the device: nothing here waits for it.
  absl::Status OptimizerStep(Optimizer& optimizer, double max_grad_norm);

  // The loss scaler's unscale: multiplies this rank's gradient shards by `inv_scale` and
  // returns whether any of them is inf or NaN (on this rank only).
  absl::StatusOr<bool> UnscaleGradients(float inv_scale);
  // Zeroes the gradient shards without stepping (a step the loss scaler skips).
  void DiscardGradients();

  // Steps `optimizer` inside backward, as optimizer.overlap says. Call before training.
  void EnableOptimizerOverlap(Optimizer* optimizer);

  // The communication hook, which a running job may change between steps (every rank at
  // the same step). The hook must be valid for the job's strategy.
  const v1::CommHook& comm_hook() const { return reducer_->hook(); }
  void set_comm_hook(const v1::CommHook& hook) { reducer_->set_hook(hook); }

  // Where to record the phase and unit this rank is in (for stall reports); may be null.
  void set_position(RankPosition* position) { position_ = position; }
  // Where to record forward, backward (per unit) and optimizer spans; may be null.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }
  // For tests: called before each stage's compute and before each collective, to shake
  // the timing (correctness must not depend on it).
  void set_delays(std::function<void()> compute, std::function<void()> communication);

  // The prefetch plan this rank follows: derived (contracts/prefetch_plan.h) from its first
  // micro-step's execution order (version 1), from the second micro-step on, until the
  // ranks adopt a newer version; unset before.
  const std::optional<v1::PrefetchPlan>& prefetch_plan() const { return prefetch_; }
  // Follows `plan` from the next micro-step (a version the coordinator re-derived, which
  // every rank adopts at the same step); INVALID_ARGUMENT if it is not for this model.
  absl::Status set_prefetch_plan(const v1::PrefetchPlan& plan);

  // The full model by state-dict names. Every rank must call it (it all-gathers); only a
  // rank that keeps it (`to_host`: the one that writes it) copies it to its host, so that
  // the others never hold a second model beside their shards (empty map).
  absl::StatusOr<TensorMap> GatherFullModel(bool to_host = true);
  // Unit u's full flat parameter (padded), all-gathered: a collective every rank makes,
  // in the same order. Copied to the host only with `to_host` (empty otherwise).
  absl::StatusOr<std::vector<float>> GatherUnit(int u, bool to_host);

  // Unit u's flat shard copied to the host (for checkpoints), its sizes, and this rank's
  // shard of a full (unpadded) flat vector of unit u (for restoring optimizer state).
  absl::StatusOr<std::vector<float>> ShardToHost(int u) const;
  // Unit u's gradient shard copied to the host (tests).
  absl::StatusOr<std::vector<float>> GradientShardToHost(int u) const;
  int64_t shard_numel(int u) const { return units_[u].shard_numel; }
  int64_t unit_numel(int u) const { return units_[u].layout.numel; }
  int64_t padded_numel(int u) const { return units_[u].padded_numel; }

  // The order this rank ran its units (those with parameters) in the latest micro-step:
  // pre-forward hooks (the root first, as it wraps the model) and post-forward hooks.
  const v1::ExecutionOrder& execution_order() const { return order_; }

  const FlatLayout& layout() const { return layout_; }
  Device* device() const { return device_; }
  const ShardingPlan& plan() const { return plan_; }
  int num_units() const { return static_cast<int>(units_.size()); }
  // Reshards' free events limit_all_gathers has not taken yet (an unshard takes the
  // oldest once two are pending).
  int pending_frees() const { return limiter_.pending(); }

 private:
  enum class Phase { kIdle, kForward, kBackward };
  class UnitParameters;

  FsdpModel(const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups, Device* device,
            FlatLayout layout, std::unique_ptr<model::Model> model);
  // The model before its shards: groups checked, compute model, threads, reducer.
  static absl::StatusOr<std::unique_ptr<FsdpModel>> Construct(const v1::JobSpec& spec,
                                                              const ShardingPlan& plan,
                                                              Groups groups, Device* device);
  absl::Status LoadOwnShards(const std::vector<std::vector<float>>& shards);
  // Unit u's sizes and buffers, its shard filled from `shard` (shard_numel floats).
  void AddUnit(int u, const float* shard);

  // The phases of a micro-step.
  absl::Status Forward(bool record_order);
  absl::Status Backward(bool sync);
  absl::Status PreBackward(FlatUnit& unit);
  absl::Status PostBackward(FlatUnit& unit, bool sync);
  absl::Status FinishBackward();
  // After a micro-step (sync or not): the plan from the first one's order.
  absl::Status DeriveFirstPlan();

  TensorRef Params(FlatUnit& unit);
  // The type whose values the gradient shards hold: param_dtype's under
  // keep_low_precision_grads (stored in FP32), FP32 otherwise.
  ScalarType GradientValues() const {
    return keep_low_precision_grads_ ? param_type_ : ScalarType::kFloat32;
  }
  // Whether computing with a unit needs a separate full buffer: sharded units (gathered)
  // and, with a low param_dtype, unsharded ones too (a rounded copy, as FSDP's
  // low-precision parameters).
  absl::StatusOr<std::vector<float>> CopyShardToHost(const Buffer& shard) const;
  bool NeedsFullCopy() const { return plan_.sharded() || param_type_ != ScalarType::kFloat32; }
  absl::Status Unshard(FlatUnit& unit);
  // Issues the all-gather of `unit` on the all-gather thread without waiting.
  void IssueUnshard(FlatUnit& unit);
  // torch.nn.utils.clip_grad_norm_ over the gradient shards, on the device.
  absl::Status ClipGradients(double max_grad_norm);
  // FSDP's prefetch: issues `target`'s unshard early if it still needs one (-1: none).
  void Prefetch(int target);
  // The plan's targets for `unit`: in its pre-forward (forward prefetch), and in its
  // pre- or post-backward when the plan prefetches at `hook`; -1 for none.
  int ForwardTarget(const FlatUnit& unit) const;
  int BackwardTarget(const FlatUnit& unit, v1::BackwardPrefetch::Value hook) const;
  void Reshard(FlatUnit& unit);
  absl::Status CheckUnsharded(const FlatUnit& unit, const char* phase) const;
  void SetPosition(const char* phase, int unit) {
    if (position_ != nullptr) position_->SetPhase(phase, unit);
  }
  void Record(const FlatUnit& unit, google::protobuf::RepeatedField<int32_t>* order) {
    if (unit.layout.numel > 0) order->Add(unit.index);
  }
  FlatUnit& root() { return units_.back(); }
  FlatUnit& UnitOfStage(int stage) { return units_[layout_.assignment.unit_of_stage[stage]]; }
  CommThread& unshard_lane() { return unshard_comm_ != nullptr ? *unshard_comm_ : *comm_; }

  const v1::JobSpec spec_;
  const ShardingPlan plan_;
  const Groups groups_;
  Device* const device_;
  Allocator* const allocator_;  // device_'s
  const FlatLayout layout_;
  const std::unique_ptr<model::Model> model_;
  // MixedPrecision (docs/semantics.md): the dtype of unsharded parameters, compute and the
  // all-gather; of gradient reduction; and whether reduced gradients stay in param_dtype.
  const ScalarType param_type_;
  // The unsharded parameters' type (Device::StorageType): FP32, or param_type_ itself.
  const ScalarType storage_type_;
  const ScalarType reduce_type_;
  const bool keep_low_precision_grads_;
  std::unique_ptr<UnitParameters> parameters_;
  v1::ExecutionOrder order_;
  RankPosition* position_ = nullptr;
  Timeline* timeline_ = nullptr;
  std::vector<FlatUnit> units_;
  Phase phase_ = Phase::kIdle;
  // Per unit, the shard ranges the optimizer steps, and whether each steps in backward.
  std::vector<std::vector<ShardRange>> optimizer_ranges_;
  std::optional<v1::PrefetchPlan> prefetch_;
  // limit_all_gathers (sharded plans): a fence per reshard, on the compute stream, after
  // the last use of the freed buffer; an unshard waits for the oldest of two.
  struct FreeEvent {
    Device* device;
    std::shared_ptr<Device::Fence> fence;
    absl::Status Synchronize() { return device->WaitForFenceOnHost(fence.get()); }
  };
  AllGatherLimiter<FreeEvent> limiter_;
  std::function<void()> compute_delay_, comm_delay_;
  std::unique_ptr<GradientReducer> reducer_;
  // The threads' launch order when their communicators need one (launch_order.h):
  // declared before them, it outlives them.
  std::unique_ptr<LaunchOrder> launch_order_;
  // Last: destroyed first, they let the running task finish (it uses the units) and join.
  // The unshard thread (all-gathers) exists when groups.unshard is set; the other thread
  // runs the reductions, and the all-gathers too without an unshard thread.
  std::unique_ptr<CommThread> unshard_comm_;
  std::unique_ptr<CommThread> comm_;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_
