#ifndef SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_
#define SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_

// The FSDP runtime for a sequential MLP on one rank: flat parameters per unit, sharded
// over the shard group; unshard (all-gather) and reshard (free) in FSDP's order; gradient
// reduction with the divide factors (reduce-scatter in the shard group, all-reduce across
// the replicate group); accumulation into the saved gradient shard; the optimizer on the
// fp32 shards. SEMANTICS.md states the orders; docs/architecture.md maps them here.
//
// With mixed precision (fsdp.mixed_precision), the all-gather moves param_dtype (a
// low-precision copy of the shard is made before it and freed after), compute uses
// operands rounded to param_dtype with FP32 arithmetic (the CPU has no BF16/FP16 BLAS),
// gradients are reduced in reduce_dtype, and the optimizer sees FP32 gradients on the
// FP32 master shards.
//
// Gradients are reduced as the job's communication hook says (comm_hooks.h). With
// DDP's mixed-precision hook, each unit's division and upcast run on a separate thread
// after its all-reduce, and the end of backward waits for them.
//
// Optimizer overlap (optimizer.overlap): the optimizer steps a unit's parameters (all of
// them, or the chosen subset) right after that unit's gradient is reduced, inside
// backward; OptimizerStep then steps only the rest.
//
// Collectives run on the model's communication threads (comm_thread.h), as FSDP's run on
// its unshard and post-backward streams: all-gathers on one (over the shard group's
// second connection, groups.unshard), issued early as the prefetch plan says; each unit's
// reduction on the other, queued at its post-backward, overlapping the backward of the
// units before it; the end of backward waits for the reductions. A prefetched all-gather
// therefore never waits behind a reduce-scatter. Each thread runs its collectives in the
// order the training thread queues them, the same on every rank, and each has its own
// communicators, so the ranks' collectives pair up whatever the timing. With limit_all_gathers, an unshard first waits until at most one
// earlier reshard's free is still pending on the device (all_gather_limiter.h; on the CPU
// frees complete at once, so it never waits).
//
// One training step is: ForwardBackward once per micro-step (sync only on the last),
// then OptimizerStep (or, after an overflow found by the loss scaler, DiscardGradients).
// Out-of-order use fails with INTERNAL naming the unit and phase.
//
// Buffers live on the model's Device (compute/device.h: CPU or CUDA) and all arithmetic
// goes through it; the communicators' collectives take the device's buffers. The
// training thread works on the device's compute stream, the communication thread and
// the upcast threads on its communication stream; a collective task waits for a fence of
// the work queued before it, and synchronises its stream before it reports.
//
// Thread-safety: none; one model per rank, used by its training thread (which owns the
// communication thread and the mixed-precision hook's upcast threads).

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/comm_thread.h"
#include "worker/comm/communicator.h"
#include "worker/compute/device.h"
#include "worker/data/safetensors.h"
#include "worker/fsdp/comm_hooks.h"
#include "worker/fsdp/layout.h"
#include "worker/fsdp/optimizer.h"
#include "worker/runtime/all_gather_limiter.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/rank_position.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/timeline.h"

namespace shardwise::fsdp {

// Adds the parameters of unit `unit`, read from its flat buffer `flat` (registration
// order, as FsdpModel lays it out), to `model` under their nn.Sequential names.
void AddUnitTensors(const ModelLayout& layout, int unit, const float* flat, TensorMap* model);

class FsdpModel {
 public:
  // `initial` holds the full model by nn.Sequential names; each rank keeps its shards.
  static absl::StatusOr<std::unique_ptr<FsdpModel>> Create(const v1::JobSpec& spec,
                                                           const ShardingPlan& plan,
                                                           Groups groups, Device* device,
                                                           const TensorMap& initial);

  // One micro-step on `batch` rows: forward, loss (scaled by `loss_scale`, e.g. 1/A for A
  // accumulation micro-steps), backward. With `sync`, gradients are reduced into the
  // gradient shards; without, they accumulate unsharded (no_sync). Returns the scaled
  // local loss.
  absl::StatusOr<double> ForwardBackward(const float* x, const int64_t* labels,
                                         const float* targets, int64_t batch, float loss_scale,
                                         bool sync);

  // Clips by global norm (when max_grad_norm > 0), steps the optimizer on every shard
  // (but the ranges already stepped in backward), and zeroes the gradient shards. Returns
  // the total gradient norm (0 if not clipping).
  absl::StatusOr<double> OptimizerStep(Optimizer& optimizer, double max_grad_norm);

  // The loss scaler's unscale: multiplies this rank's gradient shards by `inv_scale` and
  // returns whether any of them is inf or NaN (on this rank only).
  absl::StatusOr<bool> UnscaleGradients(float inv_scale);
  // Zeroes the gradient shards without stepping (a step the loss scaler skips).
  void DiscardGradients();

  // Steps `optimizer` inside backward, as optimizer.overlap says. Call before training.
  absl::Status EnableOptimizerOverlap(Optimizer* optimizer);

  // The communication hook, which a running job may change between steps (every rank at
  // the same step). The hook must be valid for the job's strategy.
  const v1::CommHook& comm_hook() const { return hook_; }

  // Where to record the phase and unit this rank is in (for stall reports); may be null.
  void set_position(RankPosition* position) { position_ = position; }
  // Where to record forward, backward (per unit) and optimizer spans; may be null.
  void set_timeline(Timeline* timeline) { timeline_ = timeline; }

  // For tests: called before each unit's compute and before each collective, to shake
  // the timing (correctness must not depend on it).
  void set_delays(std::function<void()> compute, std::function<void()> communication) {
    compute_delay_ = std::move(compute);
    comm_delay_ = std::move(communication);
  }

  // The prefetch plan this rank follows: derived (common/prefetch_plan.h) from its first
  // micro-step's execution order (version 1), from the second micro-step on, until the
  // ranks adopt a newer version; unset before.
  const std::optional<v1::PrefetchPlan>& prefetch_plan() const { return prefetch_; }
  // Follows `plan` from the next micro-step (a version the coordinator re-derived, which
  // every rank adopts at the same step); INVALID_ARGUMENT if it is not for this model.
  absl::Status set_prefetch_plan(const v1::PrefetchPlan& plan);
  void set_comm_hook(const v1::CommHook& hook) { hook_ = hook; }

  // The full model by nn.Sequential names. Every rank must call it (it all-gathers).
  absl::StatusOr<TensorMap> GatherFullModel();

  // Unit u's flat shard copied to the host (for checkpoints), its sizes, and this rank's
  // shard of a full (unpadded) flat vector of unit u (for restoring optimizer state).
  absl::StatusOr<std::vector<float>> ShardToHost(int u) const;
  int64_t shard_numel(int u) const { return units_[u].shard_numel; }
  int64_t unit_numel(int u) const { return units_[u].layout.numel; }
  int64_t padded_numel(int u) const { return units_[u].padded_numel; }
  std::vector<float> ShardOf(int u, const std::vector<float>& full) const;

  // The order this rank ran its units (those with parameters) in the latest micro-step:
  // pre-forward hooks (the root first, as it wraps the model) and post-forward hooks.
  const v1::ExecutionOrder& execution_order() const { return order_; }

  const ModelLayout& layout() const { return layout_; }
  Device* device() const { return device_; }
  const ShardingPlan& plan() const { return plan_; }
  int num_units() const { return static_cast<int>(units_.size()); }

 private:
  enum class Phase { kIdle, kForward, kBackward };
  struct Unit {
    UnitLayout layout;
    int index = 0;
    int64_t padded_numel = 0;
    int64_t shard_numel = 0;
    Buffer shard;       // fp32 master parameters [shard_numel]
    Buffer shard_grad;  // reduced gradients [shard_numel]
    Buffer full;        // unsharded parameters [padded_numel], sharded plans only
    Buffer full_grad;   // unsharded gradients [padded_numel], from backward until reduced
    bool unsharded = false;
    CommThread::Handle unsharding;  // an all-gather issued (prefetched) and not yet waited
  };
  struct LayerActivations {
    Buffer input;   // the layer's input [batch, in]
    Buffer preact;  // its output before the activation [batch, out] (not the last layer)
  };

  FsdpModel(const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups, Device* device);

  float* Params(Unit& unit);
  // Whether computing with a unit needs a separate full buffer: sharded units (gathered)
  // and, with a low param_dtype, unsharded ones too (a rounded copy, as FSDP's
  // low-precision parameters).
  bool NeedsFullCopy() const { return plan_.sharded() || param_type_ != ScalarType::kFloat32; }
  absl::Status Unshard(Unit& unit);
  // Issues the all-gather of `unit` on the communication thread without waiting.
  void IssueUnshard(Unit& unit);
  // Queues `task` on communication thread `lane`, ordered after this thread's work so
  // far; its results are complete on the device when its handle reports.
  CommThread::Handle EnqueueCollective(CommThread& lane, std::function<absl::Status()> task);
  // Sums a host value over `group` (through device memory: NCCL needs it).
  absl::Status AllReduceHostValue(Communicator& group, float* value);
  // FSDP's prefetch: issues `target`'s unshard early if it still needs one (-1: none).
  void Prefetch(int target);
  // The plan's targets for `unit`: in its pre-forward (forward prefetch), and in its
  // pre- or post-backward when the plan prefetches at `hook`; -1 for none.
  int ForwardTarget(const Unit& unit) const;
  int BackwardTarget(const Unit& unit, v1::BackwardPrefetch::Value hook) const;
  void Reshard(Unit& unit);
  absl::Status ReduceGradient(Unit& unit);
  absl::Status StartMixedPrecisionReduction(Unit& unit, const ReductionContext& context,
                                            Buffer& grad);
  void WaitForUpcasts();
  // The end of backward: every queued reduction, then the upcast threads.
  absl::Status FinishBackward();
  void SetPosition(const char* phase, int unit) {
    if (position_ != nullptr) position_->SetPhase(phase, unit);
  }
  ReductionContext reduction_context() const;
  // Steps the ranges of `unit` that are stepped in backward (optimizer overlap).
  void StepInBackward(Unit& unit);
  absl::Status CheckUnsharded(const Unit& unit, const char* phase) const;
  Unit& root() { return units_.back(); }

  const v1::JobSpec spec_;
  const ShardingPlan plan_;
  const Groups groups_;
  Device* const device_;
  Allocator* const allocator_;  // device_'s
  const ModelLayout layout_;
  // MixedPrecision (SEMANTICS.md): the dtype of unsharded parameters, compute and the
  // all-gather; of gradient reduction; and whether reduced gradients stay in param_dtype.
  const ScalarType param_type_;
  const ScalarType reduce_type_;
  const bool keep_low_precision_grads_;
  v1::CommHook hook_;
  v1::ExecutionOrder order_;
  RankPosition* position_ = nullptr;
  Timeline* timeline_ = nullptr;
  std::vector<Unit> units_;
  std::vector<LayerActivations> activations_;
  Phase phase_ = Phase::kIdle;
  // The mixed-precision hook's per-unit upcasts in flight this backward.
  std::vector<std::future<void>> upcasts_;
  // Optimizer overlap: the optimizer, and per unit the shard ranges [begin, end) it steps
  // in backward and those left for OptimizerStep.
  Optimizer* overlap_optimizer_ = nullptr;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> in_backward_ranges_;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> after_backward_ranges_;
  bool drop_gradients_in_backward_ = false;  // IN_BACKWARD: gradients are dropped after
  bool step_begun_ = false;  // this step's optimizer.BeginStep() already ran in backward
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
  absl::Mutex upcasts_mu_;  // upcasts_ is filled from the communication thread
  // Last: destroyed first, they let the running task finish (it uses the units) and join.
  // The unshard thread (all-gathers) exists when groups.unshard is set; the other thread
  // runs the reductions, and the all-gathers too without an unshard thread.
  std::unique_ptr<CommThread> unshard_comm_;
  std::unique_ptr<CommThread> comm_;
};

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_FSDP_MODEL_H_
