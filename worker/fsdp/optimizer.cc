#include "worker/fsdp/optimizer.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace shardwise::fsdp {
namespace {

Buffer CopyFromHost(Device* device, const float* data, size_t n) {
  Buffer buffer(device->allocator(), n, MemoryCategory::kOptimizerState, /*zero=*/false);
  device->CopyFromHost(buffer.data(), data, n * sizeof(float));
  return buffer;
}

absl::Status UnknownState(const std::string& name) {
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer state '", name, "'"));
}

class Sgd final : public Optimizer {
 public:
  Sgd(const v1::SgdOptions& o, int segments, Device* device)
      : scalars_{static_cast<float>(o.lr()), static_cast<float>(o.momentum()),
                 static_cast<float>(1 - o.dampening()), static_cast<float>(o.weight_decay()),
                 o.nesterov()},
        device_(device),
        momentum_buffers_(segments),
        started_(segments) {}

  void set_lr(double lr) override { scalars_.lr = static_cast<float>(lr); }
  void BeginStep() override { ++steps_; }
  int64_t steps() const override { return steps_; }
  void set_steps(int64_t steps) override { steps_ = steps; }

  std::vector<std::pair<std::string, const Buffer*>> SegmentState(int segment) const override {
    if (momentum_buffers_[segment].empty()) return {};
    return {{"momentum", &momentum_buffers_[segment]}};
  }

  absl::Status RestoreSegmentState(int segment, const std::string& name, const float* data,
                                   size_t n) override {
    if (name != "momentum") return UnknownState(name);
    momentum_buffers_[segment] = CopyFromHost(device_, data, n);
    started_[segment].all = true;
    return absl::OkStatus();
  }

  void UpdateRange(int segment, size_t segment_numel, size_t begin, size_t end, float* p,
                   const float* grad, bool decay) override {
    Buffer& buf = momentum_buffers_[segment];
    const bool momentum = scalars_.momentum != 0;
    if (momentum && buf.empty()) {
      buf = Buffer(device_->allocator(), segment_numel, MemoryCategory::kOptimizerState);
    }
    // PyTorch creates a parameter's buffer as a copy of its first gradient (no dampening
    // then); ranges are parameters, so "first" is tracked per range.
    Started& started = started_[segment];
    const bool first = momentum && !started.all && started.begins.count(begin) == 0;
    if (begin == 0 && end == segment_numel) {
      started.all = true;
    } else {
      started.begins.insert(begin);
    }
    SgdScalars scalars = scalars_;
    if (!decay) scalars.weight_decay = 0;
    device_->SgdUpdate(scalars, first, p + begin, grad + begin,
                       momentum ? buf.data() + begin : nullptr, end - begin);
  }

 private:
  SgdScalars scalars_;
  Device* const device_;
  int64_t steps_ = 0;
  std::vector<Buffer> momentum_buffers_;
  struct Started {
    bool all = false;         // the whole segment has its momentum
    std::set<size_t> begins;  // else these ranges (by first element) have theirs
  };
  std::vector<Started> started_;
};

class AdamW final : public Optimizer {
 public:
  AdamW(const v1::AdamWOptions& o, int segments, Device* device)
      : lr_(o.has_lr() ? o.lr() : 1e-3),
        beta1_(o.has_beta1() ? o.beta1() : 0.9),
        beta2_(o.has_beta2() ? o.beta2() : 0.999),
        eps_(o.has_eps() ? o.eps() : 1e-8),
        weight_decay_(o.has_weight_decay() ? o.weight_decay() : 1e-2),
        device_(device),
        exp_avg_(segments),
        exp_avg_sq_(segments) {}

  void set_lr(double lr) override { lr_ = lr; }
  void BeginStep() override { ++step_; }
  int64_t steps() const override { return step_; }
  void set_steps(int64_t steps) override { step_ = steps; }

  std::vector<std::pair<std::string, const Buffer*>> SegmentState(int segment) const override {
    if (exp_avg_[segment].empty()) return {};
    return {{"exp_avg", &exp_avg_[segment]}, {"exp_avg_sq", &exp_avg_sq_[segment]}};
  }

  absl::Status RestoreSegmentState(int segment, const std::string& name, const float* data,
                                   size_t n) override {
    if (name == "exp_avg") {
      exp_avg_[segment] = CopyFromHost(device_, data, n);
    } else if (name == "exp_avg_sq") {
      exp_avg_sq_[segment] = CopyFromHost(device_, data, n);
    } else {
      return UnknownState(name);
    }
    return absl::OkStatus();
  }

  void UpdateRange(int segment, size_t segment_numel, size_t begin, size_t end, float* p,
                   const float* grad, bool decay) override {
    AllocateState(segment, segment_numel);
    const AdamWScalars s = Scalars();
    device_->AdamWUpdate(decay ? s : s.WithoutDecay(), p + begin, grad + begin,
                         exp_avg_[segment].data() + begin, exp_avg_sq_[segment].data() + begin,
                         end - begin);
  }

  void UpdateSpans(int segment, size_t segment_numel, const std::vector<UpdateSpan>& spans,
                   float* p, const float* grad) override {
    AllocateState(segment, segment_numel);
    device_->AdamWUpdateSpans(Scalars(), p, grad, exp_avg_[segment].data(),
                              exp_avg_sq_[segment].data(), spans);
  }

 private:
  // Each state on its own: a restore may have filled one (the checkpoint reader restores
  // both or neither, this never steps through an empty one).
  void AllocateState(int segment, size_t segment_numel) {
    Allocator* allocator = device_->allocator();
    for (std::vector<Buffer>* state : {&exp_avg_, &exp_avg_sq_}) {
      Buffer& buffer = (*state)[segment];
      if (buffer.empty()) {
        buffer = Buffer(allocator, segment_numel, MemoryCategory::kOptimizerState);
      }
    }
  }

  // The step's scalars as PyTorch computes them (Python floats, i.e. double), then used in
  // fp32.
  AdamWScalars Scalars() const {
    const double bias_correction1 = 1 - std::pow(beta1_, step_);
    const double bias_correction2 = 1 - std::pow(beta2_, step_);
    AdamWScalars s;
    s.step_size = static_cast<float>(lr_ / bias_correction1);
    s.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
    s.decay = static_cast<float>(1 - lr_ * weight_decay_);
    s.one_minus_beta1 = static_cast<float>(1 - beta1_);
    s.beta2 = static_cast<float>(beta2_);
    s.one_minus_beta2 = static_cast<float>(1 - beta2_);
    s.eps = static_cast<float>(eps_);
    return s;
  }

  double lr_;
  const double beta1_, beta2_, eps_, weight_decay_;
  Device* const device_;
  int64_t step_ = 0;
  std::vector<Buffer> exp_avg_, exp_avg_sq_;
};

}  // namespace

std::vector<std::string> Optimizer::StateNames(const v1::OptimizerSpec& spec) {
  if (spec.has_adamw()) return {"exp_avg", "exp_avg_sq"};
  return {"momentum"};
}

std::unique_ptr<Optimizer> Optimizer::Create(const v1::OptimizerSpec& spec, int segments,
                                             Device* device) {
  if (spec.has_adamw()) return std::make_unique<AdamW>(spec.adamw(), segments, device);
  return std::make_unique<Sgd>(spec.sgd(), segments, device);
}

}  // namespace shardwise::fsdp
