#include "worker/fsdp/reference_training.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/compute/cpu/linear.h"
#include "worker/compute/cpu/losses.h"
#include "worker/compute/pointwise.h"
#include "worker/data/dataset.h"
#include "worker/data/weights.h"
#include "worker/fsdp/optimizer.h"

namespace shardwise::fsdp {
namespace {

// The MLP layer by layer in plain vectors: weights, biases, their gradients, and what
// the forward saves for the backward.
class ReferenceMlp {
 public:
  ReferenceMlp(const v1::JobSpec& spec, const TensorMap& weights)
      : spec_(spec),
        layers_(spec.model().layer_widths_size() - 1),
        bias_(!spec.model().has_bias() || spec.model().bias()),
        w_(layers_),
        b_(layers_),
        dw_(layers_),
        db_(layers_),
        inputs_(layers_),
        preacts_(layers_) {
    for (int l = 0; l < layers_; ++l) {
      const HostTensor& wt = weights.at(absl::StrCat(2 * l, ".weight"));
      w_[l].assign(wt.f32(), wt.f32() + wt.numel());
      if (bias_) {
        const HostTensor& bt = weights.at(absl::StrCat(2 * l, ".bias"));
        b_[l].assign(bt.f32(), bt.f32() + bt.numel());
      }
    }
  }

  int64_t width(int l) const { return spec_.model().layer_widths(l); }

  // The output [batch, last width] for the input rows [batch, first width].
  std::vector<float> Forward(std::vector<float> current, int64_t batch) {
    for (int l = 0; l < layers_; ++l) {
      std::vector<float> y(batch * width(l + 1));
      cpu::LinearForward(current.data(), w_[l].data(), bias_ ? b_[l].data() : nullptr, batch,
                         width(l), width(l + 1), y.data());
      inputs_[l] = std::move(current);
      if (l + 1 < layers_) {
        preacts_[l] = y;
        cpu::ActivationForward(spec_.model().activation(), y.data(), y.size(), y.data());
      }
      current = std::move(y);
    }
    return current;
  }

  // From the loss's gradient with respect to the output, every layer's gradients.
  void Backward(std::vector<float> grad, int64_t batch) {
    for (int l = layers_ - 1; l >= 0; --l) {
      const int64_t in = width(l), out = width(l + 1);
      if (l + 1 < layers_) {
        cpu::ActivationBackward(spec_.model().activation(), preacts_[l].data(), grad.data(),
                                grad.size(), grad.data());
      }
      dw_[l].assign(in * out, 0.0f);
      db_[l].assign(out, 0.0f);
      std::vector<float> grad_input(l > 0 ? batch * in : 0);
      cpu::LinearBackward(inputs_[l].data(), w_[l].data(), grad.data(), batch, in, out,
                          l > 0 ? grad_input.data() : nullptr, dw_[l].data(),
                          bias_ ? db_[l].data() : nullptr);
      grad = std::move(grad_input);
    }
  }

  // Scales every gradient so that their norm is at most `max_norm` (clip_grad_norm_).
  void ClipGradients(double max_norm) {
    double squares = 0;
    for (int l = 0; l < layers_; ++l) {
      for (float g : dw_[l]) squares += static_cast<double>(g) * g;
      if (bias_) {
        for (float g : db_[l]) squares += static_cast<double>(g) * g;
      }
    }
    // Narrowed to FP32 as the device's all-reduced sum is (DoubleToFloat).
    const float coef = pointwise::ClipCoefficient(static_cast<float>(squares), max_norm);
    if (coef >= 1.0f) return;
    for (int l = 0; l < layers_; ++l) {
      for (float& g : dw_[l]) g *= coef;
      for (float& g : db_[l]) g *= coef;
    }
  }

  // One segment per tensor: the update rules are elementwise, so segmentation cannot
  // change the result.
  void Step(Optimizer& optimizer) {
    optimizer.BeginStep();
    for (int l = 0; l < layers_; ++l) {
      optimizer.Update(2 * l, w_[l].data(), dw_[l].data(), w_[l].size());
      if (bias_) optimizer.Update(2 * l + 1, b_[l].data(), db_[l].data(), b_[l].size());
    }
  }

  TensorMap Parameters() const {
    TensorMap model;
    for (int l = 0; l < layers_; ++l) {
      model[absl::StrCat(2 * l, ".weight")] = F32Tensor({width(l + 1), width(l)}, w_[l].data());
      if (bias_) model[absl::StrCat(2 * l, ".bias")] = F32Tensor({width(l + 1)}, b_[l].data());
    }
    return model;
  }

  int tensors() const { return 2 * layers_; }

 private:
  const v1::JobSpec& spec_;
  const int layers_;
  const bool bias_;
  std::vector<std::vector<float>> w_, b_, dw_, db_;
  std::vector<std::vector<float>> inputs_, preacts_;
};

// The rows of the batch, side by side ([rows, width] from `source`'s rows of `width`).
template <typename T>
std::vector<T> Gather(const std::vector<T>& source, const std::vector<int64_t>& rows,
                      int64_t width) {
  std::vector<T> gathered(rows.size() * width);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(source.data() + rows[i] * width, width, gathered.data() + i * width);
  }
  return gathered;
}

// The mean loss of `output` on the rows' targets; its gradient into `grad`.
double Loss(const v1::JobSpec& spec, const Dataset& data, const std::vector<int64_t>& rows,
            const std::vector<float>& output, std::vector<float>* grad) {
  const int64_t batch = static_cast<int64_t>(rows.size()), out = data.target_width;
  grad->assign(batch * out, 0.0f);
  if (spec.loss() == v1::MSE) {
    const std::vector<float> targets = Gather(data.targets, rows, out);
    return cpu::MeanSquaredError(output.data(), targets.data(), batch, out, 1.0f, grad->data());
  }
  const std::vector<int64_t> labels = Gather(data.labels, rows, 1);
  return cpu::CrossEntropy(output.data(), labels.data(), batch, out, 1.0f, grad->data());
}

}  // namespace

absl::StatusOr<ReferenceResult> TrainReference(const v1::JobSpec& spec) {
  ASSIGN_OR_RETURN(Dataset data, LoadDataset(spec));
  ASSIGN_OR_RETURN(TensorMap weights, InitialWeights(spec));
  ReferenceMlp mlp(spec, weights);
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  auto optimizer = Optimizer::Create(spec.optimizer(), mlp.tensors(), &device);
  const int64_t batch = spec.global_batch_size();
  ReferenceResult result;
  for (int64_t step = 0; step < spec.steps(); ++step) {
    const std::vector<int64_t> rows =
        SampleRows(step, batch, /*world=*/1, /*rank=*/0, 0, 1, data.num_samples);
    const std::vector<float> output = mlp.Forward(Gather(data.x, rows, data.input_width), batch);
    std::vector<float> grad;
    result.losses.push_back(Loss(spec, data, rows, output, &grad));
    mlp.Backward(std::move(grad), batch);
    if (spec.optimizer().max_grad_norm() > 0) mlp.ClipGradients(spec.optimizer().max_grad_norm());
    mlp.Step(*optimizer);
  }
  result.model = mlp.Parameters();
  return result;
}

}  // namespace shardwise::fsdp
