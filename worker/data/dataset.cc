#include "worker/data/dataset.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/path_policy.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/safetensors.h"
#include "worker/compute/cpu/activation.h"
#include "worker/compute/cpu/linear.h"
#include "worker/data/random.h"
#include "worker/data/weights.h"

namespace shardwise {
namespace {

// The teacher's forward pass: the same MLP the job trains.
std::vector<float> TeacherOutputs(const v1::ModelSpec& model, const TensorMap& weights,
                                  const std::vector<float>& x, int64_t n) {
  std::vector<float> activations = x;
  const int layers = model.layer_widths_size() - 1;
  for (int l = 0; l < layers; ++l) {
    const int64_t in = model.layer_widths(l), out = model.layer_widths(l + 1);
    std::vector<float> y(n * out);
    auto bias = weights.find(absl::StrCat(2 * l, ".bias"));
    cpu::LinearForward(activations.data(), weights.at(absl::StrCat(2 * l, ".weight")).f32(),
                       bias == weights.end() ? nullptr : bias->second.f32(), n, in, out, y.data());
    if (l + 1 < layers) cpu::ActivationForward(model.activation(), y.data(), y.size(), y.data());
    activations = std::move(y);
  }
  return activations;
}

absl::Status WrongTensor(const std::string& path, const std::string& name, const HostTensor& tensor,
                         const std::string& expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("data.safetensors_path '", path, "': tensor '", name, "' is ", tensor.dtype,
                   " [", absl::StrJoin(tensor.shape, ", "), "], expected ", expected));
}

}  // namespace

absl::StatusOr<Dataset> LoadDataset(const v1::JobSpec& spec) {
  const v1::ModelSpec& model = spec.model();
  Dataset data;
  data.input_width = model.layer_widths(0);
  data.target_width = model.layer_widths(model.layer_widths_size() - 1);
  const bool classification = spec.loss() != v1::MSE;

  if (spec.data().has_synthetic()) {
    const v1::SyntheticData& synthetic = spec.data().synthetic();
    data.num_samples =
        synthetic.num_samples() > 0 ? synthetic.num_samples() : kDefaultSyntheticSamples;
    Random random(synthetic.seed());
    data.x.resize(data.num_samples * data.input_width);
    for (float& v : data.x) v = static_cast<float>(random.Normal());
    const std::vector<float> outputs =
        TeacherOutputs(model, SeededWeights(model, synthetic.seed() + 1), data.x, data.num_samples);
    if (classification) {
      data.labels.resize(data.num_samples);
      for (int64_t i = 0; i < data.num_samples; ++i) {
        const float* row = outputs.data() + i * data.target_width;
        data.labels[i] = std::max_element(row, row + data.target_width) - row;
      }
    } else {
      data.targets = outputs;
    }
    return data;
  }

  const std::string& path = spec.data().safetensors_path();
  auto file = ReadSafetensors(path, /*with_16_bit_floats=*/false, kCheckedPathLinks);
  if (!file.ok()) return file.status();
  auto x = file->find("x");
  auto y = file->find("y");
  if (x == file->end() || y == file->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.safetensors_path '", path, "': needs tensors 'x' and 'y'"));
  }
  if (x->second.dtype != "F32" || x->second.shape.size() != 2 ||
      x->second.shape[1] != data.input_width || x->second.shape[0] <= 0) {
    return WrongTensor(path, "x", x->second, absl::StrCat("F32 [N, ", data.input_width, "]"));
  }
  data.num_samples = x->second.shape[0];
  data.x.assign(x->second.f32(), x->second.f32() + x->second.numel());
  if (classification) {
    if (y->second.dtype != "I64" || y->second.shape != std::vector<int64_t>{data.num_samples}) {
      return WrongTensor(path, "y", y->second, absl::StrCat("I64 [", data.num_samples, "]"));
    }
    data.labels.assign(y->second.i64(), y->second.i64() + data.num_samples);
    for (int64_t i = 0; i < data.num_samples; ++i) {
      if (data.labels[i] < 0 || data.labels[i] >= data.target_width) {
        return absl::InvalidArgumentError(
            absl::StrCat("data.safetensors_path '", path, "': y[", i, "] = ", data.labels[i],
                         " is not a class in [0, ", data.target_width, ")"));
      }
    }
  } else {
    if (y->second.dtype != "F32" ||
        y->second.shape != std::vector<int64_t>{data.num_samples, data.target_width}) {
      return WrongTensor(path, "y", y->second,
                         absl::StrCat("F32 [", data.num_samples, ", ", data.target_width, "]"));
    }
    data.targets.assign(y->second.f32(), y->second.f32() + y->second.numel());
  }
  return data;
}

std::vector<int64_t> SampleRows(int64_t step, int64_t global_batch, int world, int rank, int micro,
                                int micro_steps, int64_t num_samples) {
  const int64_t per_rank = global_batch / world;
  const int64_t per_micro = per_rank / micro_steps;
  std::vector<int64_t> rows(per_micro);
  const int64_t first = step * global_batch + rank * per_rank + micro * per_micro;
  for (int64_t i = 0; i < per_micro; ++i) rows[i] = (first + i) % num_samples;
  return rows;
}

}  // namespace shardwise
