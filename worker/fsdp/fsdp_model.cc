#include "worker/fsdp/fsdp_model.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/dtype_rules.h"
#include "contracts/prefetch_plan.h"
#include "worker/fsdp/fenced_tasks.h"
#include "worker/fsdp/shard_assembler.h"

namespace shardwise::fsdp {
namespace {

// Collectives that return once enqueued (NCCL's) launch kernels that wait for their
// peers: the two threads' launches need one order across the rank's communicators
// (launch_order.h). Those that return once done (Gloo's, the host-staged path's) block
// only their own thread, and an order would only keep the two threads from overlapping.
bool NeedsOneLaunchOrder(const Groups& groups) {
  return groups.shard->stream_ordered() || groups.unshard->stream_ordered();
}

ScalarType TypeOf(v1::Dtype dtype) {
  switch (dtype) {
    case v1::FP16:
      return ScalarType::kFloat16;
    case v1::BF16:
      return ScalarType::kBFloat16;
    default:
      return ScalarType::kFloat32;
  }
}

}  // namespace

// The model's parameters as the stages read them: each one's place in the unsharded
// buffers of the unit that holds it.
class FsdpModel::UnitParameters final : public model::ParameterTable {
 public:
  explicit UnitParameters(FsdpModel* owner) : owner_(owner) {}
  ConstTensorRef value(int param) const override {
    const ParameterSlot& slot = owner_->layout_.slots[param];
    return owner_->Params(owner_->units_[slot.unit]) + slot.offset;
  }
  float* grad(int param) const override {
    const ParameterSlot& slot = owner_->layout_.slots[param];
    return owner_->units_[slot.unit].full_grad.data() + slot.offset;
  }

 private:
  FsdpModel* const owner_;
};

FsdpModel::FsdpModel(const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups,
                     Device* device, FlatLayout layout, std::unique_ptr<model::Model> model)
    : spec_(spec),
      plan_(plan),
      groups_(groups),
      device_(device),
      allocator_(device->allocator()),
      layout_(std::move(layout)),
      model_(std::move(model)),
      param_type_(TypeOf(EffectiveParamDtype(spec.fsdp().mixed_precision()))),
      storage_type_(device->StorageType(param_type_)),
      reduce_type_(TypeOf(EffectiveReduceDtype(spec.fsdp().mixed_precision()))),
      keep_low_precision_grads_(spec.fsdp().mixed_precision().keep_low_precision_grads()),
      parameters_(std::make_unique<UnitParameters>(this)) {}

FsdpModel::~FsdpModel() = default;

absl::StatusOr<std::unique_ptr<FsdpModel>> FsdpModel::Create(const v1::JobSpec& spec,
                                                             const ShardingPlan& plan,
                                                             Groups groups, Device* device,
                                                             const TensorMap& initial) {
  ASSIGN_OR_RETURN(std::unique_ptr<FsdpModel> model, Construct(spec, plan, groups, device));
  ShardAssembler assembler(model->layout_, plan);
  for (const auto& [name, tensor] : initial) RETURN_IF_ERROR(assembler.Take(name, tensor));
  ASSIGN_OR_RETURN(const std::vector<std::vector<float>> shards, std::move(assembler).Finish());
  RETURN_IF_ERROR(model->LoadOwnShards(shards));
  return model;
}

absl::StatusOr<std::unique_ptr<FsdpModel>> FsdpModel::CreateFromShards(
    const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups, Device* device,
    const std::vector<std::vector<float>>& shards) {
  ASSIGN_OR_RETURN(std::unique_ptr<FsdpModel> model, Construct(spec, plan, groups, device));
  RETURN_IF_ERROR(model->LoadOwnShards(shards));
  return model;
}

absl::StatusOr<std::unique_ptr<FsdpModel>> FsdpModel::Construct(const v1::JobSpec& spec,
                                                                const ShardingPlan& plan,
                                                                Groups groups, Device* device) {
  if (groups.shard == nullptr || groups.shard->size() != plan.shard_size ||
      groups.replicate == nullptr || groups.replicate->size() != plan.replicate_size) {
    return absl::InvalidArgumentError("communicator groups do not match the sharding plan");
  }
  ASSIGN_OR_RETURN(FlatLayout layout, BuildFlatLayout(spec.model(), spec.wrap()));
  ASSIGN_OR_RETURN(std::unique_ptr<model::Model> compute, model::Model::Create(spec, layout.model));
  ASSIGN_OR_RETURN(std::vector<std::vector<ShardRange>> ranges,
                   PlanOptimizerRanges(layout, plan, spec.optimizer()));
  std::unique_ptr<FsdpModel> model(
      new FsdpModel(spec, plan, groups, device, std::move(layout), std::move(compute)));
  model->optimizer_ranges_ = std::move(ranges);
  // The reduction thread (timeline lane 1, or 2 beside an unshard thread at lane 1).
  const bool unshard_thread = groups.unshard != nullptr;
  if (unshard_thread && NeedsOneLaunchOrder(groups)) {
    model->launch_order_ = std::make_unique<LaunchOrder>();
  }
  LaunchOrder* const order = model->launch_order_.get();
  model->comm_ = std::make_unique<CommThread>(
      [device, unshard_thread] {
        timeline_lane = unshard_thread ? 2 : 1;
        device->UseCommunicationStream(Device::CommLane::kReduction);
      },
      order);
  if (unshard_thread) {
    model->unshard_comm_ = std::make_unique<CommThread>(
        [device] {
          timeline_lane = 1;
          device->UseCommunicationStream(Device::CommLane::kUnshard);
        },
        order);
  }
  ReductionContext context;
  context.plan = &model->plan_;
  context.groups = groups;
  context.device = device;
  context.param_type = model->param_type_;
  context.reduce_type = model->reduce_type_;
  context.keep_low_precision_grads = model->keep_low_precision_grads_;
  model->reducer_ =
      std::make_unique<GradientReducer>(context, spec.comm_hook(), model->comm_.get());
  return model;
}

absl::Status FsdpModel::LoadOwnShards(const std::vector<std::vector<float>>& shards) {
  if (shards.size() != layout_.units.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards: ", shards.size(), " units, the model has ", layout_.units.size()));
  }
  for (size_t u = 0; u < shards.size(); ++u) {
    const int64_t expected =
        PaddedNumel(layout_.units[u].numel, plan_.shard_size) / plan_.shard_size;
    if (static_cast<int64_t>(shards[u].size()) != expected) {
      return absl::InvalidArgumentError(absl::StrCat("shards[", u, "]: ", shards[u].size(),
                                                     " elements, this rank's shard of unit ", u,
                                                     " has ", expected));
    }
    AddUnit(static_cast<int>(u), shards[u].data());
  }
  return absl::OkStatus();
}

void FsdpModel::AddUnit(int u, const float* shard) {
  FlatUnit unit;
  unit.layout = layout_.units[u];
  unit.index = u;
  unit.padded_numel = PaddedNumel(unit.layout.numel, plan_.shard_size);
  unit.shard_numel = unit.padded_numel / plan_.shard_size;
  unit.shard = Buffer(allocator_, unit.shard_numel, MemoryCategory::kParameters, false);
  device_->CopyFromHost(unit.shard.data(), shard, unit.shard_numel * sizeof(float));
  unit.shard_grad = Buffer(allocator_, unit.shard_numel, MemoryCategory::kGradients);
  units_.push_back(std::move(unit));
}

void FsdpModel::set_delays(std::function<void()> compute, std::function<void()> communication) {
  compute_delay_ = std::move(compute);
  comm_delay_ = communication;
  reducer_->set_delay(std::move(communication));
}

TensorRef FsdpModel::Params(FlatUnit& unit) {
  return NeedsFullCopy() ? unit.full.ref() : unit.shard.ref();
}

absl::Status FsdpModel::CheckUnsharded(const FlatUnit& unit, const char* phase) const {
  if (NeedsFullCopy() && !unit.unsharded && unit.layout.numel > 0) {
    return absl::InternalError(absl::StrCat("FSDP unit ", unit.index, ": ", phase,
                                            " needs its parameters unsharded, but they are "
                                            "sharded"));
  }
  return absl::OkStatus();
}

// ---- unshard, prefetch, reshard ----

void FsdpModel::IssueUnshard(FlatUnit& unit) {
  if (spec_.fsdp().limit_all_gathers()) {
    // At most two all-gathered units in flight: wait for the oldest pending free (a span
    // on devices with streams; on the CPU every free is already done). A device error
    // resurfaces at the end of the micro-step (status()).
    std::optional<ScopedSpan> span;
    if (device_->kind() != v1::CPU) span.emplace(timeline_, "rate limiter wait", unit.index);
    limiter_.BeforeUnshard().IgnoreError();
  }
  // Allocated here, at issue, as FSDP allocates the unsharded buffer when it unshards:
  // the memory counters see a prefetched unit from the moment it is prefetched.
  unit.full =
      Buffer(allocator_, unit.padded_numel, MemoryCategory::kParameters, storage_type_, false);
  const TensorRef full = unit.full.ref();
  Communicator* group = groups_.unshard != nullptr ? groups_.unshard : groups_.shard;
  // In two parts: the all-gather enqueued (the training thread may go on, its stream
  // ordered after it: Unshard), then its completion polled on the unshard thread while
  // later all-gathers are enqueued.
  unit.unsharding = EnqueueAfterFenceInTwoParts(
      device_, unshard_lane(),
      [this, &unit, full, group]() -> absl::Status {
        if (comm_delay_) comm_delay_();
        if (param_type_ == ScalarType::kFloat32) {
          return group->AllGather(unit.shard.data(), unit.shard_numel, full.f32());
        }
        // The low-precision copy of the shard, made before the all-gather and freed after:
        // the all-gather moves half the bytes.
        Buffer low_shard(allocator_, unit.shard_numel, MemoryCategory::kParameters, param_type_,
                         false);
        device_->Narrow(param_type_, unit.shard.data(), low_shard.as<uint16_t>(), unit.shard_numel);
        if (!full.is_float()) {
          // Stored in param_dtype: the all-gather's output is the unsharded parameters.
          return group->AllGather(low_shard.as<uint16_t>(), unit.shard_numel, full.u16(),
                                  param_type_);
        }
        Buffer low_full(allocator_, unit.padded_numel, MemoryCategory::kParameters, param_type_,
                        false);
        RETURN_IF_ERROR(group->AllGather(low_shard.as<uint16_t>(), unit.shard_numel,
                                         low_full.as<uint16_t>(), param_type_));
        // Both 16-bit buffers go back to this thread's pool: whatever reuses them is
        // ordered after the all-gather and the widening, on this thread's stream.
        low_shard.Reset();
        // Stored in FP32: widen the gathered values (exactly representable).
        device_->Widen(param_type_, low_full.as<uint16_t>(), full.f32(), unit.padded_numel);
        return absl::OkStatus();
      },
      [group] { return group->CollectivesCompleted(); });
}

absl::Status FsdpModel::Unshard(FlatUnit& unit) {
  if (!NeedsFullCopy() || unit.unsharded || unit.layout.numel == 0) {
    unit.unsharded = true;
    return absl::OkStatus();
  }
  if (!plan_.sharded()) {
    // Whole parameters on every rank: the low-precision copy is a local rounding (into
    // 16-bit storage, or in FP32).
    unit.full =
        Buffer(allocator_, unit.padded_numel, MemoryCategory::kParameters, storage_type_, false);
    if (storage_type_ != ScalarType::kFloat32) {
      device_->Narrow(storage_type_, unit.shard.data(), unit.full.as<uint16_t>(),
                      unit.padded_numel);
    } else {
      device_->Copy(unit.full.data(), unit.shard.data(), unit.padded_numel * sizeof(float));
      device_->RoundToPrecision(param_type_, unit.full.data(), unit.padded_numel);
    }
    unit.unsharded = true;
    return absl::OkStatus();
  }
  if (!unit.unsharding.valid()) IssueUnshard(unit);
  // Only until the all-gather is enqueued: this thread's stream waits for it on the device
  // (FSDP's wait_stream on the unshard stream), so the host runs ahead. Its completion is
  // watched on the unshard thread; a failure there surfaces when the lane drains at the
  // end of the micro-step (FinishBackward, Evaluate).
  const absl::StatusOr<CommThread::Fence> gathered = unit.unsharding.WaitStarted();
  unit.unsharding = CommThread::Handle();
  RETURN_IF_ERROR(gathered.status());
  device_->WaitForFence(gathered->get());
  unit.unsharded = true;
  return absl::OkStatus();
}

int FsdpModel::ForwardTarget(const FlatUnit& unit) const {
  if (!prefetch_.has_value() || !prefetch_->forward_prefetch()) return -1;
  return prefetch_->forward_target(unit.index);
}

int FsdpModel::BackwardTarget(const FlatUnit& unit, v1::BackwardPrefetch::Value hook) const {
  if (!prefetch_.has_value() || prefetch_->backward_prefetch() != hook) return -1;
  return prefetch_->backward_target(unit.index);
}

void FsdpModel::Prefetch(int target) {
  if (target < 0 || !plan_.sharded()) return;
  FlatUnit& unit = units_[target];
  if (unit.unsharded || unit.unsharding.valid() || unit.layout.numel == 0 || unit.backward_done) {
    return;
  }
  IssueUnshard(unit);
}

void FsdpModel::Reshard(FlatUnit& unit) {
  if (!NeedsFullCopy()) return;
  // A prefetch nobody used: wait for it to complete before freeing its buffer (this
  // thread's stream never waited for it).
  if (unit.unsharding.valid()) {
    unit.unsharding.Wait().IgnoreError();
    unit.unsharding = CommThread::Handle();
  }
  // A free event only for a buffer freed, as FSDP's: a unit without parameters (an MLP's
  // root) or one resharded already would queue events nothing waits on, and the limiter,
  // waiting on the oldest, would limit nothing.
  const bool freed = !unit.full.empty();
  unit.full.Reset();  // really released: the allocator's parameter bytes drop
  unit.unsharded = false;
  if (freed && plan_.sharded() && spec_.fsdp().limit_all_gathers()) {
    limiter_.OnReshard({device_, device_->RecordFence()});
  }
}

// ---- the micro-step ----

absl::Status FsdpModel::ForwardBackward(const MicroBatch& batch, float loss_scale, bool sync,
                                        double* loss) {
  if (phase_ != Phase::kIdle) {
    return absl::InternalError("FSDP: a micro-step started before the last one finished");
  }
  phase_ = Phase::kForward;
  model_->Begin(batch, device_, param_type_);
  RETURN_IF_ERROR(Forward(/*record_order=*/true));
  model_->Loss(loss_scale, loss);
  phase_ = Phase::kBackward;
  RETURN_IF_ERROR(Backward(sync));
  model_->End();
  RETURN_IF_ERROR(DeriveFirstPlan());
  phase_ = Phase::kIdle;
  return absl::OkStatus();
}

// The root wraps the whole model: its pre-forward (unshard) runs first, and it is not
// resharded after forward (it is used again at the end of forward and first in backward).
absl::Status FsdpModel::Forward(bool record_order) {
  for (FlatUnit& unit : units_) unit.backward_done = false;
  if (record_order) order_.Clear();
  v1::ExecutionOrder unused;
  v1::ExecutionOrder& order = record_order ? order_ : unused;
  Record(root(), order.mutable_pre_forward());
  SetPosition("forward", root().index);
  RETURN_IF_ERROR(Unshard(root()));
  Prefetch(ForwardTarget(root()));
  for (int s = 0; s < model_->num_stages(); ++s) {
    FlatUnit& unit = UnitOfStage(s);
    const bool child = !unit.layout.is_root;
    SetPosition("forward", unit.index);
    if (child && s == unit.layout.first_stage) {  // pre-forward
      Record(unit, order.mutable_pre_forward());
      RETURN_IF_ERROR(Unshard(unit));
      Prefetch(ForwardTarget(unit));
    }
    ScopedSpan span(timeline_, "forward", unit.index);
    RETURN_IF_ERROR(CheckUnsharded(unit, "forward"));
    if (compute_delay_) compute_delay_();
    model_->Forward(s, *parameters_);
    if (child && s == unit.layout.last_stage) {  // post-forward
      Record(unit, order.mutable_post_forward());
      if (plan_.reshard_after_forward) Reshard(unit);
    }
  }
  Record(root(), order.mutable_post_forward());
  return absl::OkStatus();
}

// Stages in reverse; a unit's pre-backward before its last stage's backward, its
// post-backward after its first stage's.
absl::Status FsdpModel::Backward(bool sync) {
  for (int s = model_->num_stages() - 1; s >= 0; --s) {
    FlatUnit& unit = UnitOfStage(s);
    SetPosition("backward", unit.index);
    if (s == unit.layout.last_stage) RETURN_IF_ERROR(PreBackward(unit));
    ScopedSpan span(timeline_, "backward", unit.index);
    RETURN_IF_ERROR(CheckUnsharded(unit, "backward"));
    if (compute_delay_) compute_delay_();
    model_->Backward(s, *parameters_);
    if (s == unit.layout.first_stage) RETURN_IF_ERROR(PostBackward(unit, sync));
  }
  // The end-of-backward callback: wait for the queued reductions and the upcast threads;
  // a root that runs no stage was unsharded but never visited.
  RETURN_IF_ERROR(FinishBackward());
  if (!root().layout.has_stages()) Reshard(root());
  return absl::OkStatus();
}

absl::Status FsdpModel::PreBackward(FlatUnit& unit) {
  RETURN_IF_ERROR(Unshard(unit));
  Prefetch(BackwardTarget(unit, v1::BackwardPrefetch::BACKWARD_PRE));
  if (unit.full_grad.empty()) {
    unit.full_grad = Buffer(allocator_, unit.padded_numel, MemoryCategory::kGradients);
  }
  return absl::OkStatus();
}

absl::Status FsdpModel::PostBackward(FlatUnit& unit, bool sync) {
  unit.backward_done = true;
  // Parameter gradients are in param_dtype: FP32 accumulation, rounded once per unit and
  // micro-step (accumulation across micro-steps also rounds, as in low precision).
  device_->RoundToPrecision(param_type_, unit.full_grad.data(), unit.padded_numel);
  // Free in backward (sharded strategies, when syncing or resharding after forward); a
  // low-precision copy of unsharded parameters is freed once gradients are synced (by
  // the upcast thread, with the mixed-precision hook).
  const bool mixed_precision_hook = IsMixedPrecisionHook(reducer_->hook());
  if ((plan_.sharded() && (sync || plan_.reshard_after_forward)) ||
      (!plan_.sharded() && NeedsFullCopy() && sync && !mixed_precision_hook)) {
    Reshard(unit);
  }
  // BACKWARD_POST's prefetch, then this unit's reduction: on separate threads (as
  // PyTorch's unshard and post-backward streams) the all-gather does not wait for the
  // reduce-scatter; where both share one thread, the all-gather goes first.
  Prefetch(BackwardTarget(unit, v1::BackwardPrefetch::BACKWARD_POST));
  if (!sync) return absl::OkStatus();
  if (unit.full_grad.empty()) {
    return absl::InternalError(absl::StrCat("FSDP unit ", unit.index,
                                            ": reducing gradients that backward never produced"));
  }
  reducer_->Reduce(unit, [this, &unit] { Reshard(unit); });
  return absl::OkStatus();
}

absl::Status FsdpModel::FinishBackward() {
  RETURN_IF_ERROR(reducer_->Finish());
  RETURN_IF_ERROR(unshard_lane().Drain());  // every all-gather completed (or its failure)
  return device_->status();
}

// From the second micro-step on, prefetch as the first one's order says (every rank
// derives the same plan: the coordinator checks that their orders agree).
absl::Status FsdpModel::DeriveFirstPlan() {
  if (prefetch_.has_value()) return absl::OkStatus();
  ASSIGN_OR_RETURN(v1::PrefetchPlan plan, PlanPrefetch(order_, spec_.fsdp(), num_units()));
  plan.set_version(1);  // as the coordinator numbers the plan of the first iteration
  prefetch_ = std::move(plan);
  return absl::OkStatus();
}

absl::StatusOr<double> FsdpModel::Evaluate(const MicroBatch& batch) {
  if (phase_ != Phase::kIdle) return absl::InternalError("FSDP: evaluation inside a micro-step");
  for (const FlatUnit& unit : units_) {
    if (!unit.full_grad.empty()) {
      return absl::InternalError(absl::StrCat(
          "FSDP unit ", unit.index, ": evaluation with unreduced gradients (between steps only)"));
    }
  }
  phase_ = Phase::kForward;
  model_->Begin(batch, device_, param_type_);
  RETURN_IF_ERROR(Forward(/*record_order=*/false));
  // Evaluation is rare and its caller wants the value: it waits for it.
  Buffer slot(allocator_, 1, MemoryCategory::kActivations, ScalarType::kFloat64, false);
  model_->Loss(1.0f, slot.as<double>());
  double loss = 0;
  RETURN_IF_ERROR(device_->CopyToHost(&loss, slot.as<double>(), sizeof(loss)));
  model_->End();
  // Nothing waits for a backward: every unit still gathered gives its full parameters
  // back (the root, and every unit of a strategy that keeps them after forward).
  for (FlatUnit& unit : units_) {
    if (unit.unsharded || unit.unsharding.valid()) Reshard(unit);
  }
  RETURN_IF_ERROR(unshard_lane().Drain());
  RETURN_IF_ERROR(device_->status());
  phase_ = Phase::kIdle;
  return loss;
}

absl::Status FsdpModel::set_prefetch_plan(const v1::PrefetchPlan& plan) {
  // The coordinator plans the units of the recorded order, which leaves out trailing
  // units without parameters (a root without layers): they prefetch nothing.
  if (plan.forward_target_size() > num_units() || plan.backward_target_size() > num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch plan version ", plan.version(), " has targets for ",
                     std::max(plan.forward_target_size(), plan.backward_target_size()),
                     " units; this model has ", num_units()));
  }
  v1::PrefetchPlan padded = plan;
  while (padded.forward_target_size() < num_units()) padded.add_forward_target(-1);
  while (padded.backward_target_size() < num_units()) padded.add_backward_target(-1);
  for (const auto* targets : {&padded.forward_target(), &padded.backward_target()}) {
    for (int target : *targets) {
      if (target >= num_units()) {
        return absl::InvalidArgumentError(absl::StrCat("prefetch plan version ", plan.version(),
                                                       ": no unit ", target, " in this model"));
      }
    }
  }
  prefetch_ = std::move(padded);
  return absl::OkStatus();
}

// ---- the optimizer step ----

void FsdpModel::EnableOptimizerOverlap(Optimizer* optimizer) {
  if (spec_.optimizer().overlap().mode() == v1::OptimizerOverlap::NONE) return;
  reducer_->StepInBackward(optimizer, &optimizer_ranges_);
}

absl::StatusOr<bool> FsdpModel::UnscaleGradients(float inv_scale) {
  bool found_inf = false;
  for (FlatUnit& unit : units_) {
    ASSIGN_OR_RETURN(const bool unit_inf, device_->MultiplyAndCheckFinite(
                                              unit.shard_grad.data(), unit.shard_numel, inv_scale));
    // Torch unscales a 16-bit gradient in place: in float, stored back in its type.
    device_->RoundToPrecision(GradientValues(), unit.shard_grad.data(), unit.shard_numel);
    found_inf = found_inf || unit_inf;
  }
  return found_inf;
}

void FsdpModel::DiscardGradients() {
  for (FlatUnit& unit : units_) {
    device_->Zero(unit.shard_grad.data(), unit.shard_numel * sizeof(float));
  }
}

// Shards are disjoint within the shard group and identical across replicate groups: the
// sum of squares (in double on each rank, as FP32 across ranks, as FSDP's
// clip_grad_norm_ all-reduces it) is all-reduced over the shard group only. A group of one
// rank needs no collective, so a single-GPU step never waits for the norm on the host.
absl::Status FsdpModel::ClipGradients(double max_grad_norm) {
  Buffer local(allocator_, 1, MemoryCategory::kCommunication, ScalarType::kFloat64);
  for (const FlatUnit& unit : units_) {
    device_->AddSquaredNorm(unit.shard_grad.data(), unit.shard_numel, local.as<double>());
  }
  Buffer squares(allocator_, 1, MemoryCategory::kCommunication, false);
  device_->DoubleToFloat(local.as<double>(), squares.data(), 1);
  if (groups_.shard->size() > 1) {
    // The collective runs on the communicator's own stream: everything before it is done.
    RETURN_IF_ERROR(device_->Synchronize());
    RETURN_IF_ERROR(groups_.shard->AllReduce(squares.data(), 1));
    // Stream-ordered (on the reduction stream), it may return before the sum is there.
    // The reduction thread is drained (the step's backward ended), so this thread is the
    // group's only caller and poller.
    RETURN_IF_ERROR(groups_.shard->WaitForCollectives());
  }
  for (FlatUnit& unit : units_) {
    device_->ClipToNorm(unit.shard_grad.data(), unit.shard_numel, squares.data(), max_grad_norm,
                        GradientValues());
  }
  return absl::OkStatus();
}

absl::Status FsdpModel::OptimizerStep(Optimizer& optimizer, double max_grad_norm) {
  if (phase_ != Phase::kIdle)
    return absl::InternalError("FSDP: optimizer step inside a micro-step");
  SetPosition("optimizer", -1);
  ScopedSpan span(timeline_, "optimizer");
  for (const FlatUnit& unit : units_) {
    if (!unit.full_grad.empty()) {
      return absl::InternalError(
          absl::StrCat("FSDP unit ", unit.index,
                       ": optimizer step with gradients not yet reduced (the last "
                       "micro-step must sync)"));
    }
  }
  if (max_grad_norm > 0) RETURN_IF_ERROR(ClipGradients(max_grad_norm));
  if (!reducer_->TakeStepBegun()) optimizer.BeginStep();
  for (FlatUnit& unit : units_) {
    std::vector<UpdateSpan> spans;
    for (const ShardRange& range : optimizer_ranges_[unit.index]) {
      if (!range.in_backward) spans.push_back({range.begin, range.end, range.decay});
    }
    if (spans.empty()) continue;
    optimizer.UpdateSpans(unit.index, unit.shard_numel, spans, unit.shard.data(),
                          unit.shard_grad.data());
  }
  DiscardGradients();
  return device_->status();
}

// ---- the whole model ----

absl::StatusOr<TensorMap> FsdpModel::GatherFullModel(bool to_host) {
  TensorMap model;
  for (const FlatUnit& unit : units_) {
    if (unit.layout.numel == 0) continue;
    ASSIGN_OR_RETURN(const std::vector<float> full, GatherUnit(unit.index, to_host));
    if (to_host) AddUnitTensors(layout_, unit.index, full.data(), &model);
  }
  return model;
}

absl::StatusOr<std::vector<float>> FsdpModel::GatherUnit(int u, bool to_host) {
  FlatUnit& unit = units_[u];
  // The collectives run on the communicator's stream: the optimizer's updates first.
  RETURN_IF_ERROR(device_->Synchronize());
  Buffer gathered(allocator_, unit.padded_numel, MemoryCategory::kCommunication, false);
  RETURN_IF_ERROR(groups_.shard->AllGather(unit.shard.data(), unit.shard_numel, gathered.data()));
  // Between steps (the reduction thread drained): this thread polls the group alone.
  RETURN_IF_ERROR(groups_.shard->WaitForCollectives());
  std::vector<float> full;
  if (!to_host) return full;
  full.resize(unit.padded_numel);
  RETURN_IF_ERROR(device_->CopyToHost(full.data(), gathered.data(), gathered.bytes()));
  return full;
}

absl::StatusOr<std::vector<float>> FsdpModel::ShardToHost(int u) const {
  return CopyShardToHost(units_[u].shard);
}

absl::StatusOr<std::vector<float>> FsdpModel::GradientShardToHost(int u) const {
  return CopyShardToHost(units_[u].shard_grad);
}

absl::StatusOr<std::vector<float>> FsdpModel::CopyShardToHost(const Buffer& shard) const {
  std::vector<float> host(shard.numel());
  RETURN_IF_ERROR(device_->CopyToHost(host.data(), shard.data(), host.size() * sizeof(float)));
  return host;
}

}  // namespace shardwise::fsdp
