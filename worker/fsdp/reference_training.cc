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

absl::StatusOr<ReferenceResult> TrainReference(const v1::JobSpec& spec) {
  ASSIGN_OR_RETURN(Dataset data, LoadDataset(spec));
  ASSIGN_OR_RETURN(TensorMap weights, InitialWeights(spec));
  const int layers = spec.model().layer_widths_size() - 1;
  const bool bias = !spec.model().has_bias() || spec.model().bias();
  std::vector<std::vector<float>> w(layers), b(layers), dw(layers), db(layers);
  for (int l = 0; l < layers; ++l) {
    const HostTensor& wt = weights.at(absl::StrCat(2 * l, ".weight"));
    w[l].assign(wt.f32(), wt.f32() + wt.numel());
    if (bias) {
      const HostTensor& bt = weights.at(absl::StrCat(2 * l, ".bias"));
      b[l].assign(bt.f32(), bt.f32() + bt.numel());
    }
  }
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  // One optimizer segment per tensor: the update rules are elementwise, so segmentation
  // cannot change the result.
  auto optimizer = Optimizer::Create(spec.optimizer(), 2 * layers, &device);
  const int64_t batch = spec.global_batch_size();
  const v1::Activation act = spec.model().activation();
  ReferenceResult result;

  for (int64_t step = 0; step < spec.steps(); ++step) {
    const std::vector<int64_t> rows =
        SampleRows(step, batch, /*world=*/1, /*rank=*/0, 0, 1, data.num_samples);
    std::vector<std::vector<float>> inputs(layers), preacts(layers);
    std::vector<float> current(batch * data.input_width);
    for (int64_t i = 0; i < batch; ++i) {
      std::copy_n(data.x.data() + rows[i] * data.input_width, data.input_width,
                  current.data() + i * data.input_width);
    }
    for (int l = 0; l < layers; ++l) {
      const int64_t in = spec.model().layer_widths(l), out = spec.model().layer_widths(l + 1);
      std::vector<float> y(batch * out);
      cpu::LinearForward(current.data(), w[l].data(), bias ? b[l].data() : nullptr, batch, in, out,
                         y.data());
      inputs[l] = std::move(current);
      if (l + 1 < layers) {
        preacts[l] = y;
        cpu::ActivationForward(act, y.data(), y.size(), y.data());
      }
      current = std::move(y);
    }
    const int64_t out = data.target_width;
    std::vector<float> grad(batch * out);
    double loss;
    if (spec.loss() == v1::MSE) {
      std::vector<float> targets(batch * out);
      for (int64_t i = 0; i < batch; ++i) {
        std::copy_n(data.targets.data() + rows[i] * out, out, targets.data() + i * out);
      }
      loss = cpu::MeanSquaredError(current.data(), targets.data(), batch, out, 1.0f, grad.data());
    } else {
      std::vector<int64_t> labels;
      for (int64_t row : rows) labels.push_back(data.labels[row]);
      loss = cpu::CrossEntropy(current.data(), labels.data(), batch, out, 1.0f, grad.data());
    }
    result.losses.push_back(loss);
    for (int l = layers - 1; l >= 0; --l) {
      const int64_t in = spec.model().layer_widths(l), width = spec.model().layer_widths(l + 1);
      if (l + 1 < layers)
        cpu::ActivationBackward(act, preacts[l].data(), grad.data(), grad.size(), grad.data());
      dw[l].assign(in * width, 0.0f);
      db[l].assign(width, 0.0f);
      std::vector<float> grad_input(l > 0 ? batch * in : 0);
      cpu::LinearBackward(inputs[l].data(), w[l].data(), grad.data(), batch, in, width,
                          l > 0 ? grad_input.data() : nullptr, dw[l].data(),
                          bias ? db[l].data() : nullptr);
      grad = std::move(grad_input);
    }
    if (spec.optimizer().max_grad_norm() > 0) {
      double squares = 0;
      for (int l = 0; l < layers; ++l) {
        for (float g : dw[l]) squares += static_cast<double>(g) * g;
        if (bias)
          for (float g : db[l]) squares += static_cast<double>(g) * g;
      }
      const float coef =
          pointwise::ClipCoefficient(std::sqrt(squares), spec.optimizer().max_grad_norm());
      if (coef < 1.0f) {
        for (int l = 0; l < layers; ++l) {
          for (float& g : dw[l]) g *= coef;
          for (float& g : db[l]) g *= coef;
        }
      }
    }
    optimizer->BeginStep();
    for (int l = 0; l < layers; ++l) {
      optimizer->Update(2 * l, w[l].data(), dw[l].data(), w[l].size());
      if (bias) optimizer->Update(2 * l + 1, b[l].data(), db[l].data(), b[l].size());
    }
  }
  for (int l = 0; l < layers; ++l) {
    const int64_t in = spec.model().layer_widths(l), out = spec.model().layer_widths(l + 1);
    result.model[absl::StrCat(2 * l, ".weight")] = F32Tensor({out, in}, w[l].data());
    if (bias) result.model[absl::StrCat(2 * l, ".bias")] = F32Tensor({out}, b[l].data());
  }
  return result;
}

}  // namespace shardwise::fsdp
