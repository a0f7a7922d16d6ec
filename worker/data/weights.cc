#include "worker/data/weights.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/data/random.h"

namespace shardwise {
namespace {

bool HasBias(const v1::ModelSpec& model) { return !model.has_bias() || model.bias(); }

}  // namespace

TensorMap SeededWeights(const v1::ModelSpec& model, uint64_t seed) {
  Random random(seed);
  TensorMap weights;
  for (int l = 0; l + 1 < model.layer_widths_size(); ++l) {
    const int64_t in = model.layer_widths(l), out = model.layer_widths(l + 1);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    std::vector<float> w(in * out);
    for (float& v : w) v = static_cast<float>(random.Uniform(-bound, bound));
    weights[absl::StrCat(2 * l, ".weight")] = F32Tensor({out, in}, w.data());
    if (HasBias(model)) {
      std::vector<float> b(out);
      for (float& v : b) v = static_cast<float>(random.Uniform(-bound, bound));
      weights[absl::StrCat(2 * l, ".bias")] = F32Tensor({out}, b.data());
    }
  }
  return weights;
}

absl::StatusOr<TensorMap> InitialWeights(const v1::JobSpec& spec) {
  if (!spec.init().has_safetensors_path()) return SeededWeights(spec.model(), spec.init().seed());
  const std::string& path = spec.init().safetensors_path();
  auto file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  const TensorMap expected = SeededWeights(spec.model(), 0);  // for names and shapes
  TensorMap weights;
  for (const auto& [name, want] : expected) {
    auto it = file->find(name);
    if (it == file->end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("init.safetensors_path '", path, "': no tensor '", name, "'"));
    }
    if (it->second.dtype != "F32" || it->second.shape != want.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "init.safetensors_path '", path, "': tensor '", name, "' is ", it->second.dtype, " [",
          absl::StrJoin(it->second.shape, ", "), "], expected F32 [",
          absl::StrJoin(want.shape, ", "), "]"));
    }
    weights[name] = it->second;
  }
  return weights;
}

}  // namespace shardwise
