#include "worker/fsdp/fsdp_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/dtype_rules.h"
#include "worker/compute/casts.h"
#include "worker/compute/cpu_math.h"

namespace shardwise::fsdp {
namespace {

void Scale(float* data, int64_t n, double divisor) {
  if (divisor == 1) return;
  const float factor = static_cast<float>(divisor);
  for (int64_t i = 0; i < n; ++i) data[i] /= factor;
}

ScalarType TypeOf(v1::Dtype dtype) {
  switch (dtype) {
    case v1::FP16: return ScalarType::kFloat16;
    case v1::BF16: return ScalarType::kBFloat16;
    default: return ScalarType::kFloat32;
  }
}

}  // namespace

FsdpModel::FsdpModel(const v1::JobSpec& spec, const ShardingPlan& plan, Groups groups,
                     Allocator* allocator)
    : spec_(spec),
      plan_(plan),
      groups_(groups),
      allocator_(allocator),
      layout_(BuildModelLayout(spec.model(), spec.wrap())),
      param_type_(TypeOf(EffectiveParamDtype(spec.fsdp().mixed_precision()))),
      reduce_type_(TypeOf(EffectiveReduceDtype(spec.fsdp().mixed_precision()))),
      keep_low_precision_grads_(spec.fsdp().mixed_precision().keep_low_precision_grads()) {}

absl::StatusOr<std::unique_ptr<FsdpModel>> FsdpModel::Create(const v1::JobSpec& spec,
                                                             const ShardingPlan& plan,
                                                             Groups groups, Allocator* allocator,
                                                             const TensorMap& initial) {
  if (groups.shard == nullptr || groups.shard->size() != plan.shard_size ||
      groups.replicate == nullptr || groups.replicate->size() != plan.replicate_size) {
    return absl::InvalidArgumentError("communicator groups do not match the sharding plan");
  }
  std::unique_ptr<FsdpModel> model(new FsdpModel(spec, plan, groups, allocator));
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
    unit.shard = Buffer(allocator, unit.shard_numel, MemoryCategory::kParameters, false);
    std::memcpy(unit.shard.data(), flat.data() + plan.shard_rank * unit.shard_numel,
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

absl::Status FsdpModel::Unshard(Unit& unit) {
  if (!NeedsFullCopy() || unit.unsharded || unit.layout.numel == 0) {
    unit.unsharded = true;
    return absl::OkStatus();
  }
  unit.full = Buffer(allocator_, unit.padded_numel, MemoryCategory::kParameters, false);
  if (param_type_ == ScalarType::kFloat32) {
    RETURN_IF_ERROR(
        groups_.shard->AllGather(unit.shard.data(), unit.shard_numel, unit.full.data()));
  } else if (!plan_.sharded()) {
    // Whole parameters on every rank: the low-precision copy is a local rounding.
    std::memcpy(unit.full.data(), unit.shard.data(), unit.padded_numel * sizeof(float));
    cpu::RoundToPrecision(param_type_, unit.full.data(), unit.padded_numel);
  } else {
    // The low-precision copy of the shard, made before the all-gather and freed after:
    // the all-gather moves half the bytes.
    Buffer low_shard(allocator_, unit.shard_numel, MemoryCategory::kParameters, param_type_,
                     false);
    cpu::Narrow(param_type_, unit.shard.data(), low_shard.as<uint16_t>(), unit.shard_numel);
    Buffer low_full(allocator_, unit.padded_numel, MemoryCategory::kParameters, param_type_,
                    false);
    RETURN_IF_ERROR(groups_.shard->AllGather(low_shard.as<uint16_t>(), unit.shard_numel,
                                             low_full.as<uint16_t>(), param_type_));
    low_shard.Reset();
    // BLAS computes in FP32: widen the gathered values (exactly representable).
    cpu::Widen(param_type_, low_full.as<uint16_t>(), unit.full.data(), unit.padded_numel);
  }
  unit.unsharded = true;
  return absl::OkStatus();
}

void FsdpModel::Reshard(Unit& unit) {
  if (!NeedsFullCopy()) return;
  unit.full.Reset();  // really released: the allocator's parameter bytes drop
  unit.unsharded = false;
}

// SEMANTICS.md, "Gradient reduction": divide by predivide; reduce-scatter in the shard
// group; all-reduce across the replicate group; divide by postdivide; add into the saved
// gradient shard. With a shard group of one this is NO_SHARD's all-reduce path exactly.
absl::Status FsdpModel::ReduceGradient(Unit& unit) {
  if (unit.full_grad.empty()) {
    return absl::InternalError(absl::StrCat("FSDP unit ", unit.index,
                                            ": reducing gradients that backward never produced"));
  }
  float* grad = unit.full_grad.data();
  Buffer reduced(allocator_, unit.shard_numel, MemoryCategory::kCommunication, false);
  if (reduce_type_ == ScalarType::kFloat32) {
    Scale(grad, unit.padded_numel, plan_.predivide);
    RETURN_IF_ERROR(groups_.shard->ReduceScatter(grad, unit.shard_numel, reduced.data()));
    if (plan_.replicate_size > 1) {
      RETURN_IF_ERROR(groups_.replicate->AllReduce(reduced.data(), unit.shard_numel));
    }
    Scale(reduced.data(), unit.shard_numel, plan_.postdivide);
  } else {
    // Cast to reduce_dtype, then every step rounds in it: predivide, the reduction's
    // additions, postdivide.
    cpu::RoundToPrecision(reduce_type_, grad, unit.padded_numel);
    Scale(grad, unit.padded_numel, plan_.predivide);
    Buffer low(allocator_, unit.padded_numel, MemoryCategory::kCommunication, reduce_type_,
               false);
    cpu::Narrow(reduce_type_, grad, low.as<uint16_t>(), unit.padded_numel);
    Buffer low_shard(allocator_, unit.shard_numel, MemoryCategory::kCommunication, reduce_type_,
                     false);
    RETURN_IF_ERROR(groups_.shard->ReduceScatter(low.as<uint16_t>(), unit.shard_numel,
                                                 low_shard.as<uint16_t>(), reduce_type_));
    if (plan_.replicate_size > 1) {
      RETURN_IF_ERROR(groups_.replicate->AllReduce(low_shard.as<uint16_t>(), unit.shard_numel,
                                                   reduce_type_));
    }
    cpu::Widen(reduce_type_, low_shard.as<uint16_t>(), reduced.data(), unit.shard_numel);
    Scale(reduced.data(), unit.shard_numel, plan_.postdivide);
    cpu::RoundToPrecision(reduce_type_, reduced.data(), unit.shard_numel);
  }
  // keep_low_precision_grads keeps the reduced gradient in param_dtype; otherwise it is
  // used as FP32 (the parameter's dtype).
  if (keep_low_precision_grads_) cpu::RoundToPrecision(param_type_, reduced.data(), unit.shard_numel);
  float* saved = unit.shard_grad.data();
  for (int64_t i = 0; i < unit.shard_numel; ++i) saved[i] += reduced.data()[i];
  unit.full_grad.Reset();
  return absl::OkStatus();
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
  RETURN_IF_ERROR(Unshard(root()));
  Buffer current(allocator_, batch * layout_.layers[0].in, MemoryCategory::kActivations, false);
  std::memcpy(current.data(), x, current.numel() * sizeof(float));
  // MixedPrecision casts floating-point inputs to param_dtype; each op's output is then in
  // param_dtype too (rounded here after FP32 arithmetic).
  cpu::RoundToPrecision(param_type_, current.data(), current.numel());
  for (Unit& unit : units_) {
    const bool is_root = unit.layout.is_root;
    if (!is_root) RETURN_IF_ERROR(Unshard(unit));  // pre-forward
    RETURN_IF_ERROR(CheckUnsharded(unit, "forward"));
    for (int l : unit.layout.layers) {
      const LayerLayout& layer = layout_.layers[l];
      float* params = Params(unit);
      Buffer out(allocator_, batch * layer.out, MemoryCategory::kActivations, false);
      cpu::LinearForward(current.data(), params + layer.weight_offset,
                         layer.bias ? params + layer.bias_offset : nullptr, batch, layer.in,
                         layer.out, out.data());
      cpu::RoundToPrecision(param_type_, out.data(), out.numel());
      activations_[l].input = std::move(current);
      if (l + 1 < num_layers) {
        Buffer activated(allocator_, out.numel(), MemoryCategory::kActivations, false);
        cpu::ActivationForward(act, out.data(), out.numel(), activated.data());
        cpu::RoundToPrecision(param_type_, activated.data(), activated.numel());
        activations_[l].preact = std::move(out);
        current = std::move(activated);
      } else {
        current = std::move(out);
      }
    }
    if (!is_root && plan_.reshard_after_forward) Reshard(unit);  // post-forward
  }

  // Loss, and its gradient with respect to the outputs.
  const int64_t out_width = layout_.layers.back().out;
  Buffer grad(allocator_, batch * out_width, MemoryCategory::kActivations, false);
  const double loss =
      spec_.loss() == v1::MSE
          ? cpu::MeanSquaredError(current.data(), targets, batch, out_width, loss_scale,
                                  grad.data())
          : cpu::CrossEntropy(current.data(), labels, batch, out_width, loss_scale, grad.data());
  current.Reset();
  cpu::RoundToPrecision(param_type_, grad.data(), grad.numel());

  // Backward, units in reverse order: pre-backward unshards, post-backward reduces (when
  // syncing) and reshards (sharded strategies, when syncing or resharding after forward).
  phase_ = Phase::kBackward;
  for (auto unit_it = units_.rbegin(); unit_it != units_.rend(); ++unit_it) {
    Unit& unit = *unit_it;
    if (unit.layout.layers.empty()) continue;
    RETURN_IF_ERROR(Unshard(unit));  // pre-backward
    RETURN_IF_ERROR(CheckUnsharded(unit, "backward"));
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
        cpu::ActivationBackward(act, activations_[l].preact.data(), grad.data(), grad.numel(),
                                grad.data());
        cpu::RoundToPrecision(param_type_, grad.data(), grad.numel());
        activations_[l].preact.Reset();
      }
      Buffer grad_input;
      if (l > 0) {
        grad_input = Buffer(allocator_, batch * layer.in, MemoryCategory::kActivations, false);
      }
      cpu::LinearBackward(activations_[l].input.data(), params + layer.weight_offset,
                          grad.data(), batch, layer.in, layer.out,
                          l > 0 ? grad_input.data() : nullptr, grads + layer.weight_offset,
                          layer.bias ? grads + layer.bias_offset : nullptr);
      activations_[l].input.Reset();
      if (l > 0) cpu::RoundToPrecision(param_type_, grad_input.data(), grad_input.numel());
      grad = std::move(grad_input);
    }
    // Parameter gradients are in param_dtype: FP32 accumulation, rounded once per unit
    // and micro-step (accumulation across micro-steps also rounds, as in low precision).
    cpu::RoundToPrecision(param_type_, grads, unit.padded_numel);
    if (sync) RETURN_IF_ERROR(ReduceGradient(unit));  // post-backward
    // Free in backward (sharded strategies, when syncing or resharding after forward); a
    // low-precision copy of unsharded parameters is freed once gradients are synced.
    if ((plan_.sharded() && (sync || plan_.reshard_after_forward)) ||
        (!plan_.sharded() && NeedsFullCopy() && sync)) {
      Reshard(unit);
    }
  }
  // The end-of-backward catch-all: a root without layers was unsharded but never visited.
  if (root().layout.layers.empty()) Reshard(root());
  phase_ = Phase::kIdle;
  return loss;
}

absl::StatusOr<double> FsdpModel::OptimizerStep(Optimizer& optimizer, double max_grad_norm) {
  if (phase_ != Phase::kIdle) return absl::InternalError("FSDP: optimizer step inside a micro-step");
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
      const float* g = unit.shard_grad.data();
      for (int64_t i = 0; i < unit.shard_numel; ++i) local += static_cast<double>(g[i]) * g[i];
    }
    float sum = static_cast<float>(local);
    RETURN_IF_ERROR(groups_.shard->AllReduce(&sum, 1));
    total_norm = std::sqrt(static_cast<double>(sum));
    const float coef = ClipCoefficient(total_norm, max_grad_norm);
    if (coef < 1.0f) {
      for (Unit& unit : units_) {
        float* g = unit.shard_grad.data();
        for (int64_t i = 0; i < unit.shard_numel; ++i) g[i] *= coef;
      }
    }
  }
  optimizer.BeginStep();
  for (Unit& unit : units_) {
    if (unit.shard_numel == 0) continue;
    optimizer.Update(unit.index, unit.shard.data(), unit.shard_grad.data(), unit.shard_numel);
    std::memset(unit.shard_grad.data(), 0, unit.shard_numel * sizeof(float));
  }
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
  TensorMap model;
  for (Unit& unit : units_) {
    if (unit.layout.layers.empty()) continue;
    std::vector<float> full(unit.padded_numel);
    RETURN_IF_ERROR(groups_.shard->AllGather(unit.shard.data(), unit.shard_numel, full.data()));
    AddUnitTensors(layout_, unit.index, full.data(), &model);
  }
  return model;
}

}  // namespace shardwise::fsdp
