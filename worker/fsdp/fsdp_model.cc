#include "worker/fsdp/fsdp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/dtype_rules.h"
#include "common/prefetch_plan.h"
#include "common/status_macros.h"

namespace shardwise::fsdp {
namespace {

ScalarType TypeOf(v1::Dtype dtype) {
  switch (dtype) {
    case v1::FP16: return ScalarType::kFloat16;
    case v1::BF16: return ScalarType::kBFloat16;
    default: return ScalarType::kFloat32;
  }
}

}  // namespace

FsdpModel::FsdpModel(const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups,
                     Device* device)
    : spec_(spec),
      plan_(plan),
      groups_(groups),
      device_(device),
      allocator_(device->allocator()),
      layout_(BuildModelLayout(spec.model(), spec.wrap())),
      param_type_(TypeOf(EffectiveParamDtype(spec.fsdp().mixed_precision()))),
      reduce_type_(TypeOf(EffectiveReduceDtype(spec.fsdp().mixed_precision()))),
      keep_low_precision_grads_(spec.fsdp().mixed_precision().keep_low_precision_grads()),
      hook_(spec.comm_hook()) {}

absl::StatusOr<std::unique_ptr<FsdpModel>> FsdpModel::Create(const v1::JobSpec& spec,
                                                             const ShardingPlan& plan,
                                                             Groups groups, Device* device,
                                                             const TensorMap& initial) {
  if (groups.shard == nullptr || groups.shard->size() != plan.shard_size ||
      groups.replicate == nullptr || groups.replicate->size() != plan.replicate_size) {
    return absl::InvalidArgumentError("communicator groups do not match the sharding plan");
  }
  std::unique_ptr<FsdpModel> model(new FsdpModel(spec, plan, groups, device));
  // The reduction thread (timeline lane 1, or 2 beside an unshard thread at lane 1).
  const bool unshard_thread = groups.unshard != nullptr;
  model->comm_ = std::make_unique<CommThread>([device, unshard_thread] {
    timeline_lane = unshard_thread ? 2 : 1;
    device->UseCommunicationStream(Device::CommLane::kReduction);
  });
  if (unshard_thread) {
    model->unshard_comm_ = std::make_unique<CommThread>([device] {
      timeline_lane = 1;
      device->UseCommunicationStream(Device::CommLane::kUnshard);
    });
  }
  model->activations_.resize(model->layout_.layers.size());
  for (size_t u = 0; u < model->layout_.units.size(); ++u) {
    Unit unit;
    unit.layout = model->layout_.units[u];
    unit.index = static_cast<int>(u);
    unit.padded_numel = PaddedNumel(unit.layout.numel, plan.shard_size);
    unit.shard_numel = unit.padded_numel / plan.shard_size;
    // Flatten the unit's parameters in registration order, zero-padded, and keep chunk
    // `shard_rank`.
    std::vector<float> flat(unit.padded_numel, 0.0f);
    for (int l : unit.layout.layers) {
      const LayerLayout& layer = model->layout_.layers[l];
      for (const auto& [name, offset, numel] :
           {std::make_tuple(layer.weight_name, layer.weight_offset, layer.in * layer.out),
            std::make_tuple(layer.bias_name, layer.bias_offset, layer.out)}) {
        if (offset < 0) continue;
        auto it = initial.find(name);
        if (it == initial.end() || it->second.numel() != numel || it->second.dtype != "F32") {
          return absl::InvalidArgumentError(absl::StrCat("initial weights lack F32 '", name,
                                                         "' with ", numel, " elements"));
        }
        std::memcpy(flat.data() + offset, it->second.f32(), numel * sizeof(float));
      }
    }
    Allocator* allocator = device->allocator();
    unit.shard = Buffer(allocator, unit.shard_numel, MemoryCategory::kParameters, false);
    device->CopyFromHost(unit.shard.data(), flat.data() + plan.shard_rank * unit.shard_numel,
                         unit.shard_numel * sizeof(float));
    unit.shard_grad = Buffer(allocator, unit.shard_numel, MemoryCategory::kGradients);
    model->units_.push_back(std::move(unit));
  }
  return model;
}

std::vector<float> FsdpModel::ShardOf(int u, const std::vector<float>& full) const {
  const Unit& unit = units_[u];
  std::vector<float> shard(unit.shard_numel, 0.0f);
  const int64_t begin = plan_.shard_rank * unit.shard_numel;
  for (int64_t i = 0; i < unit.shard_numel && begin + i < static_cast<int64_t>(full.size()); ++i) {
    shard[i] = full[begin + i];
  }
  return shard;
}

float* FsdpModel::Params(Unit& unit) {
  return NeedsFullCopy() ? unit.full.data() : unit.shard.data();
}

absl::Status FsdpModel::CheckUnsharded(const Unit& unit, const char* phase) const {
  if (NeedsFullCopy() && !unit.unsharded && unit.layout.numel > 0) {
    return absl::InternalError(absl::StrCat("FSDP unit ", unit.index, ": ", phase,
                                            " needs its parameters unsharded, but they are "
                                            "sharded"));
  }
  return absl::OkStatus();
}

void FsdpModel::IssueUnshard(Unit& unit) {
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
  unit.full = Buffer(allocator_, unit.padded_numel, MemoryCategory::kParameters, false);
  float* full = unit.full.data();
  CommThread& lane = unshard_comm_ != nullptr ? *unshard_comm_ : *comm_;
  Communicator* group = groups_.unshard != nullptr ? groups_.unshard : groups_.shard;
  unit.unsharding = EnqueueCollective(lane, [this, &unit, full, group]() -> absl::Status {
    if (comm_delay_) comm_delay_();
    if (param_type_ == ScalarType::kFloat32) {
      return group->AllGather(unit.shard.data(), unit.shard_numel, full);
    }
    // The low-precision copy of the shard, made before the all-gather and freed after:
    // the all-gather moves half the bytes.
    Buffer low_shard(allocator_, unit.shard_numel, MemoryCategory::kParameters, param_type_,
                     false);
    device_->Narrow(param_type_, unit.shard.data(), low_shard.as<uint16_t>(), unit.shard_numel);
    Buffer low_full(allocator_, unit.padded_numel, MemoryCategory::kParameters, param_type_,
                    false);
    RETURN_IF_ERROR(group->AllGather(low_shard.as<uint16_t>(), unit.shard_numel,
                                     low_full.as<uint16_t>(), param_type_));
    low_shard.Reset();  // the all-gather has read it (collectives complete before returning)
    // The GEMMs compute in FP32: widen the gathered values (exactly representable).
    device_->Widen(param_type_, low_full.as<uint16_t>(), full, unit.padded_numel);
    return absl::OkStatus();
  });
}

CommThread::Handle FsdpModel::EnqueueCollective(CommThread& lane,
                                                std::function<absl::Status()> task) {
  // The task reads what this thread produced before now (the fence), and what it writes
  // is complete when its handle reports (the final synchronisation).
  return lane.Enqueue([this, fence = device_->RecordFence(),
                       task = std::move(task)]() -> absl::Status {
    device_->WaitForFence(fence.get());
    const absl::Status status = task();
    const absl::Status synced = device_->Synchronize();
    return status.ok() ? synced : status;
  });
}

absl::Status FsdpModel::AllReduceHostValue(Communicator& group, float* value) {
  Buffer scratch(allocator_, 1, MemoryCategory::kCommunication, false);
  device_->CopyFromHost(scratch.data(), value, sizeof(float));
  // The collective runs on the communicator's own stream: everything before it is done.
  RETURN_IF_ERROR(device_->Synchronize());
  RETURN_IF_ERROR(group.AllReduce(scratch.data(), 1));
  return device_->CopyToHost(value, scratch.data(), sizeof(float));
}

absl::Status FsdpModel::Unshard(Unit& unit) {
  if (!NeedsFullCopy() || unit.unsharded || unit.layout.numel == 0) {
    unit.unsharded = true;
    return absl::OkStatus();
  }
  if (!plan_.sharded()) {
    // Whole parameters on every rank: the low-precision copy is a local rounding.
    unit.full = Buffer(allocator_, unit.padded_numel, MemoryCategory::kParameters, false);
    device_->Copy(unit.full.data(), unit.shard.data(), unit.padded_numel * sizeof(float));
    device_->RoundToPrecision(param_type_, unit.full.data(), unit.padded_numel);
    unit.unsharded = true;
    return absl::OkStatus();
  }
  if (!unit.unsharding.valid()) IssueUnshard(unit);
  const absl::Status gathered = unit.unsharding.Wait();
  unit.unsharding = CommThread::Handle();
  RETURN_IF_ERROR(gathered);
  unit.unsharded = true;
  return absl::OkStatus();
}

int FsdpModel::ForwardTarget(const Unit& unit) const {
  if (!prefetch_.has_value() || !prefetch_->forward_prefetch()) return -1;
  return prefetch_->forward_target(unit.index);
}

int FsdpModel::BackwardTarget(const Unit& unit, v1::BackwardPrefetch::Value hook) const {
  if (!prefetch_.has_value() || prefetch_->backward_prefetch() != hook) return -1;
  return prefetch_->backward_target(unit.index);
}

void FsdpModel::Prefetch(int target) {
  if (target < 0 || !plan_.sharded()) return;
  Unit& unit = units_[target];
  if (unit.unsharded || unit.unsharding.valid() || unit.layout.numel == 0) return;
  IssueUnshard(unit);
}

void FsdpModel::Reshard(Unit& unit) {
  if (!NeedsFullCopy()) return;
  // A prefetch nobody used: wait for it before freeing its buffer.
  if (unit.unsharding.valid()) {
    unit.unsharding.Wait().IgnoreError();
    unit.unsharding = CommThread::Handle();
  }
  unit.full.Reset();  // really released: the allocator's parameter bytes drop
  unit.unsharded = false;
  if (plan_.sharded() && spec_.fsdp().limit_all_gathers()) {
    limiter_.OnReshard({device_, device_->RecordFence()});
  }
}

ReductionContext FsdpModel::reduction_context() const {
  ReductionContext context;
  context.plan = &plan_;
  context.groups = groups_;
  context.device = device_;
  context.param_type = param_type_;
  context.reduce_type = reduce_type_;
  context.keep_low_precision_grads = keep_low_precision_grads_;
  return context;
}

// Post-backward: queue the unit's reduction (as the hook says) on the communication
// thread, where it overlaps the backward of the units before it; it adds into the saved
// gradient shard (accumulation across micro-steps) and frees the unsharded gradient.
absl::Status FsdpModel::ReduceGradient(Unit& unit) {
  if (unit.full_grad.empty()) {
    return absl::InternalError(absl::StrCat("FSDP unit ", unit.index,
                                            ": reducing gradients that backward never produced"));
  }
  auto grad = std::make_shared<Buffer>(std::move(unit.full_grad));
  const ReductionContext context = reduction_context();
  if (IsMixedPrecisionHook(hook_)) {
    EnqueueCollective(*comm_, [this, &unit, grad, context]() -> absl::Status {
      if (comm_delay_) comm_delay_();
      return StartMixedPrecisionReduction(unit, context, *grad);
    });
    return absl::OkStatus();
  }
  EnqueueCollective(*comm_, [this, &unit, grad, context, hook = hook_]() -> absl::Status {
    if (comm_delay_) comm_delay_();
    Buffer reduced(allocator_, unit.shard_numel, MemoryCategory::kCommunication, false);
    RETURN_IF_ERROR(
        ReduceUnitGradient(hook, context, grad->data(), unit.shard_numel, reduced.data()));
    device_->Accumulate(unit.shard_grad.data(), reduced.data(), unit.shard_numel);
    StepInBackward(unit);
    // The unsharded gradient and `reduced` go back to the allocator once the work that
    // reads them is done.
    RETURN_IF_ERROR(device_->Synchronize());
    grad->Reset();
    return absl::OkStatus();
  });
  return absl::OkStatus();
}

// DDP's mixed-precision hook: the all-reduce here (on the communication thread), then on
// its own thread the division by N, the upcast into the gradient shard, and the release
// of the unit's low-precision parameters (the FP32 ones are used again from the next
// forward). The end of backward waits for every unit's thread.
absl::Status FsdpModel::StartMixedPrecisionReduction(Unit& unit, const ReductionContext& context,
                                                     Buffer& grad) {
  ASSIGN_OR_RETURN(Bucket bucket, MixedPrecisionAllReduce(context, grad.data(), unit.shard_numel));
  grad.Reset();
  auto shared = std::make_shared<Bucket>(std::move(bucket));
  absl::MutexLock lock(&upcasts_mu_);
  upcasts_.push_back(std::async(std::launch::async, [this, &unit, shared, context] {
    // Beside the communication thread, on its stream (the bucket was made there).
    device_->UseCommunicationStream(Device::CommLane::kReduction);
    Buffer reduced(allocator_, unit.shard_numel, MemoryCategory::kCommunication, false);
    MixedPrecisionFinish(context, *shared, reduced.data());
    device_->Accumulate(unit.shard_grad.data(), reduced.data(), unit.shard_numel);
    device_->Synchronize().IgnoreError();  // errors stay sticky: FinishBackward sees them
    Reshard(unit);
  }));
  return absl::OkStatus();
}

absl::Status FsdpModel::FinishBackward() {
  const absl::Status reduced = comm_->Drain();
  WaitForUpcasts();
  RETURN_IF_ERROR(reduced);
  return device_->status();
}

void FsdpModel::WaitForUpcasts() {
  absl::MutexLock lock(&upcasts_mu_);
  for (std::future<void>& upcast : upcasts_) upcast.wait();
  upcasts_.clear();
}

void FsdpModel::StepInBackward(Unit& unit) {
  if (overlap_optimizer_ == nullptr || in_backward_ranges_[unit.index].empty()) return;
  if (!step_begun_) {
    overlap_optimizer_->BeginStep();
    step_begun_ = true;
  }
  float* grad = unit.shard_grad.data();
  for (const auto& [begin, end] : in_backward_ranges_[unit.index]) {
    overlap_optimizer_->UpdateRange(unit.index, unit.shard_numel, begin, end, unit.shard.data(),
                                    grad);
    // Stepped: the gradient is consumed (IN_BACKWARD drops it; after
    // HOOK_THEN_OPTIMIZER nothing else reads it before the next zero_grad).
    device_->Zero(grad + begin, (end - begin) * sizeof(float));
  }
}

absl::Status FsdpModel::EnableOptimizerOverlap(Optimizer* optimizer) {
  const v1::OptimizerOverlap& overlap = spec_.optimizer().overlap();
  in_backward_ranges_.assign(units_.size(), {});
  after_backward_ranges_.assign(units_.size(), {});
  for (const Unit& unit : units_) {
    after_backward_ranges_[unit.index].push_back({0, unit.shard_numel});
  }
  if (overlap.mode() == v1::OptimizerOverlap::NONE) return absl::OkStatus();
  const bool all = overlap.mode() == v1::OptimizerOverlap::IN_BACKWARD || overlap.params().empty();
  int matched = 0;
  for (const Unit& unit : units_) {
    if (unit.shard_numel == 0) continue;
    auto& in = in_backward_ranges_[unit.index];
    auto& after = after_backward_ranges_[unit.index];
    if (all) {
      in = {{0, unit.shard_numel}};
      after.clear();
      continue;
    }
    // The chosen parameters' parts of this rank's shard, in flat order.
    const int64_t shard_begin = plan_.shard_rank * unit.shard_numel;
    const int64_t shard_end = shard_begin + unit.shard_numel;
    for (int l : unit.layout.layers) {
      const LayerLayout& layer = layout_.layers[l];
      for (const auto& [name, offset, numel] :
           {std::make_tuple(layer.weight_name, layer.weight_offset, layer.in * layer.out),
            std::make_tuple(layer.bias_name, layer.bias_offset, layer.out)}) {
        if (offset < 0) continue;
        if (std::find(overlap.params().begin(), overlap.params().end(), name) ==
            overlap.params().end()) {
          continue;
        }
        ++matched;
        const int64_t begin = std::max(offset, shard_begin);
        const int64_t end = std::min(offset + numel, shard_end);
        if (begin < end) in.push_back({begin - shard_begin, end - shard_begin});
      }
    }
    // Everything else (other parameters, padding) steps after backward.
    after.clear();
    int64_t next = 0;
    for (const auto& [begin, end] : in) {
      if (next < begin) after.push_back({next, begin});
      next = end;
    }
    if (next < unit.shard_numel) after.push_back({next, unit.shard_numel});
  }
  if (!all && matched != overlap.params_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer.overlap.params names ", overlap.params_size(), " parameters, but only ",
        matched, " of them are parameters of this model"));
  }
  overlap_optimizer_ = optimizer;
  return absl::OkStatus();
}

absl::StatusOr<bool> FsdpModel::UnscaleGradients(float inv_scale) {
  bool found_inf = false;
  for (Unit& unit : units_) {
    ASSIGN_OR_RETURN(const bool unit_inf, device_->MultiplyAndCheckFinite(
                                              unit.shard_grad.data(), unit.shard_numel, inv_scale));
    found_inf = found_inf || unit_inf;
  }
  return found_inf;
}

void FsdpModel::DiscardGradients() {
  for (Unit& unit : units_) device_->Zero(unit.shard_grad.data(), unit.shard_numel * sizeof(float));
}

absl::StatusOr<double> FsdpModel::ForwardBackward(const float* x, const int64_t* labels,
                                                  const float* targets, int64_t batch,
                                                  float loss_scale, bool sync) {
  if (phase_ != Phase::kIdle) {
    return absl::InternalError("FSDP: a micro-step started before the last one finished");
  }
  phase_ = Phase::kForward;
  const int num_layers = static_cast<int>(layout_.layers.size());
  const v1::Activation act = spec_.model().activation();

  // Forward. The root wraps the whole model: its pre-forward (unshard) runs first, and it
  // is not resharded after forward (its parameters are needed again at once in backward).
  order_.Clear();
  auto record = [](const Unit& unit, google::protobuf::RepeatedField<int32_t>* order) {
    if (unit.layout.numel > 0) order->Add(unit.index);
  };
  record(root(), order_.mutable_pre_forward());
  SetPosition("forward", root().index);
  RETURN_IF_ERROR(Unshard(root()));
  Prefetch(ForwardTarget(root()));
  Buffer current(allocator_, batch * layout_.layers[0].in, MemoryCategory::kActivations, false);
  device_->CopyFromHost(current.data(), x, current.bytes());
  // MixedPrecision casts floating-point inputs to param_dtype; each op's output is then in
  // param_dtype too (rounded here after FP32 arithmetic).
  device_->RoundToPrecision(param_type_, current.data(), current.numel());
  for (Unit& unit : units_) {
    const bool is_root = unit.layout.is_root;
    SetPosition("forward", unit.index);
    ScopedSpan span(timeline_, "forward", unit.index);
    if (!is_root) {
      record(unit, order_.mutable_pre_forward());
      RETURN_IF_ERROR(Unshard(unit));  // pre-forward
      Prefetch(ForwardTarget(unit));
    }
    RETURN_IF_ERROR(CheckUnsharded(unit, "forward"));
    if (compute_delay_) compute_delay_();
    for (int l : unit.layout.layers) {
      const LayerLayout& layer = layout_.layers[l];
      float* params = Params(unit);
      Buffer out(allocator_, batch * layer.out, MemoryCategory::kActivations, false);
      device_->LinearForward(current.data(), params + layer.weight_offset,
                             layer.bias ? params + layer.bias_offset : nullptr, batch, layer.in,
                             layer.out, out.data(), param_type_);
      device_->RoundToPrecision(param_type_, out.data(), out.numel());
      activations_[l].input = std::move(current);
      if (l + 1 < num_layers) {
        Buffer activated(allocator_, out.numel(), MemoryCategory::kActivations, false);
        device_->ActivationForward(act, out.data(), out.numel(), activated.data());
        device_->RoundToPrecision(param_type_, activated.data(), activated.numel());
        activations_[l].preact = std::move(out);
        current = std::move(activated);
      } else {
        current = std::move(out);
      }
    }
    if (!is_root) {
      record(unit, order_.mutable_post_forward());
      if (plan_.reshard_after_forward) Reshard(unit);  // post-forward
    }
  }
  record(root(), order_.mutable_post_forward());

  // Loss, and its gradient with respect to the outputs.
  const int64_t out_width = layout_.layers.back().out;
  Buffer grad(allocator_, batch * out_width, MemoryCategory::kActivations, false);
  absl::StatusOr<double> loss;
  if (spec_.loss() == v1::MSE) {
    Buffer target(allocator_, batch * out_width, MemoryCategory::kActivations, false);
    device_->CopyFromHost(target.data(), targets, target.bytes());
    loss = device_->MeanSquaredError(current.data(), target.data(), batch, out_width, loss_scale,
                                     grad.data());
  } else {
    Buffer label(allocator_, batch, MemoryCategory::kActivations, ScalarType::kInt64, false);
    device_->CopyFromHost(label.as<int64_t>(), labels, label.bytes());
    loss = device_->CrossEntropy(current.data(), label.as<int64_t>(), batch, out_width,
                                 loss_scale, grad.data());
  }
  RETURN_IF_ERROR(loss.status());
  current.Reset();
  device_->RoundToPrecision(param_type_, grad.data(), grad.numel());

  // Backward, units in reverse order: pre-backward unshards, post-backward reduces (when
  // syncing) and reshards (sharded strategies, when syncing or resharding after forward).
  phase_ = Phase::kBackward;
  for (auto unit_it = units_.rbegin(); unit_it != units_.rend(); ++unit_it) {
    Unit& unit = *unit_it;
    if (unit.layout.layers.empty()) continue;
    SetPosition("backward", unit.index);
    ScopedSpan span(timeline_, "backward", unit.index);
    RETURN_IF_ERROR(Unshard(unit));  // pre-backward
    Prefetch(BackwardTarget(unit, v1::BackwardPrefetch::BACKWARD_PRE));
    RETURN_IF_ERROR(CheckUnsharded(unit, "backward"));
    if (compute_delay_) compute_delay_();
    if (unit.full_grad.empty()) {
      unit.full_grad = Buffer(allocator_, unit.padded_numel, MemoryCategory::kGradients);
    }
    float* params = Params(unit);
    float* grads = unit.full_grad.data();
    for (auto l_it = unit.layout.layers.rbegin(); l_it != unit.layout.layers.rend(); ++l_it) {
      const int l = *l_it;
      const LayerLayout& layer = layout_.layers[l];
      if (l + 1 < num_layers) {
        // Through the activation that followed this layer.
        device_->ActivationBackward(act, activations_[l].preact.data(), grad.data(),
                                    grad.numel(), grad.data());
        device_->RoundToPrecision(param_type_, grad.data(), grad.numel());
        activations_[l].preact.Reset();
      }
      Buffer grad_input;
      if (l > 0) {
        grad_input = Buffer(allocator_, batch * layer.in, MemoryCategory::kActivations, false);
      }
      device_->LinearBackward(activations_[l].input.data(), params + layer.weight_offset,
                              grad.data(), batch, layer.in, layer.out,
                              l > 0 ? grad_input.data() : nullptr, grads + layer.weight_offset,
                              layer.bias ? grads + layer.bias_offset : nullptr, param_type_);
      activations_[l].input.Reset();
      if (l > 0) device_->RoundToPrecision(param_type_, grad_input.data(), grad_input.numel());
      grad = std::move(grad_input);
    }
    // Parameter gradients are in param_dtype: FP32 accumulation, rounded once per unit
    // and micro-step (accumulation across micro-steps also rounds, as in low precision).
    device_->RoundToPrecision(param_type_, grads, unit.padded_numel);
    // Post-backward. Free in backward (sharded strategies, when syncing or resharding
    // after forward); a low-precision copy of unsharded parameters is freed once
    // gradients are synced (by the upcast thread, with the mixed-precision hook).
    if ((plan_.sharded() && (sync || plan_.reshard_after_forward)) ||
        (!plan_.sharded() && NeedsFullCopy() && sync && !IsMixedPrecisionHook(hook_))) {
      Reshard(unit);
    }
    // BACKWARD_POST's prefetch, then this unit's reduction: on separate threads (as
    // PyTorch's unshard and post-backward streams) the all-gather does not wait for the
    // reduce-scatter; where both share one thread, the all-gather goes first.
    Prefetch(BackwardTarget(unit, v1::BackwardPrefetch::BACKWARD_POST));
    if (sync) RETURN_IF_ERROR(ReduceGradient(unit));
  }
  // The end-of-backward callback: wait for the queued reductions and the upcast threads;
  // a root without layers was unsharded but never visited.
  RETURN_IF_ERROR(FinishBackward());
  if (root().layout.layers.empty()) Reshard(root());
  // From the second micro-step on, prefetch as the first one's order says (every rank
  // derives the same plan: the coordinator checks that their orders agree).
  if (!prefetch_.has_value()) {
    auto plan = PlanPrefetch(order_, spec_.fsdp(), num_units());
    if (!plan.ok()) return plan.status();
    plan->set_version(1);  // as the coordinator numbers the plan of the first iteration
    prefetch_ = std::move(*plan);
  }
  phase_ = Phase::kIdle;
  return *loss;
}

absl::Status FsdpModel::set_prefetch_plan(const v1::PrefetchPlan& plan) {
  // The coordinator plans the units of the recorded order, which leaves out trailing
  // units without parameters (a root without layers): they prefetch nothing.
  if (plan.forward_target_size() > num_units() || plan.backward_target_size() > num_units()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefetch plan version ", plan.version(), " has targets for ",
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

absl::StatusOr<double> FsdpModel::OptimizerStep(Optimizer& optimizer, double max_grad_norm) {
  if (phase_ != Phase::kIdle) return absl::InternalError("FSDP: optimizer step inside a micro-step");
  SetPosition("optimizer", -1);
  ScopedSpan span(timeline_, "optimizer");
  for (const Unit& unit : units_) {
    if (!unit.full_grad.empty()) {
      return absl::InternalError(absl::StrCat(
          "FSDP unit ", unit.index, ": optimizer step with gradients not yet reduced (the last "
          "micro-step must sync)"));
    }
  }
  double total_norm = 0;
  if (max_grad_norm > 0) {
    // Shards are disjoint within the shard group and identical across replicate groups:
    // the sum of squares is all-reduced over the shard group only.
    double local = 0;
    for (const Unit& unit : units_) {
      ASSIGN_OR_RETURN(const double squares,
                       device_->SquaredNorm(unit.shard_grad.data(), unit.shard_numel));
      local += squares;
    }
    float sum = static_cast<float>(local);
    RETURN_IF_ERROR(AllReduceHostValue(*groups_.shard, &sum));
    total_norm = std::sqrt(static_cast<double>(sum));
    const float coef = ClipCoefficient(total_norm, max_grad_norm);
    if (coef < 1.0f) {
      for (Unit& unit : units_) device_->Multiply(unit.shard_grad.data(), unit.shard_numel, coef);
    }
  }
  if (!step_begun_) optimizer.BeginStep();
  step_begun_ = false;
  for (Unit& unit : units_) {
    if (unit.shard_numel == 0) continue;
    if (after_backward_ranges_.empty()) {
      optimizer.Update(unit.index, unit.shard.data(), unit.shard_grad.data(), unit.shard_numel);
    } else {
      for (const auto& [begin, end] : after_backward_ranges_[unit.index]) {
        optimizer.UpdateRange(unit.index, unit.shard_numel, begin, end, unit.shard.data(),
                              unit.shard_grad.data());
      }
    }
  }
  DiscardGradients();
  RETURN_IF_ERROR(device_->status());
  return total_norm;
}

void AddUnitTensors(const ModelLayout& layout, int unit, const float* flat, TensorMap* model) {
  for (int l : layout.units[unit].layers) {
    const LayerLayout& layer = layout.layers[l];
    (*model)[layer.weight_name] = F32Tensor({layer.out, layer.in}, flat + layer.weight_offset);
    if (layer.bias) (*model)[layer.bias_name] = F32Tensor({layer.out}, flat + layer.bias_offset);
  }
}

absl::StatusOr<TensorMap> FsdpModel::GatherFullModel() {
  // The collectives run on the communicator's stream: the optimizer's updates first.
  RETURN_IF_ERROR(device_->Synchronize());
  TensorMap model;
  for (Unit& unit : units_) {
    if (unit.layout.layers.empty()) continue;
    Buffer gathered(allocator_, unit.padded_numel, MemoryCategory::kCommunication, false);
    RETURN_IF_ERROR(
        groups_.shard->AllGather(unit.shard.data(), unit.shard_numel, gathered.data()));
    std::vector<float> full(unit.padded_numel);
    RETURN_IF_ERROR(device_->CopyToHost(full.data(), gathered.data(), gathered.bytes()));
    AddUnitTensors(layout_, unit.index, full.data(), &model);
  }
  return model;
}

absl::StatusOr<std::vector<float>> FsdpModel::ShardToHost(int u) const {
  std::vector<float> shard(units_[u].shard_numel);
  RETURN_IF_ERROR(device_->CopyToHost(shard.data(), units_[u].shard.data(),
                                      shard.size() * sizeof(float)));
  return shard;
}

}  // namespace shardwise::fsdp
