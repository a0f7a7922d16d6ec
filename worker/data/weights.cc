#include "worker/data/weights.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/path_policy.h"
#include "common/status_macros.h"
#include "contracts/model_description.h"
#include "contracts/transformer_config.h"
#include "contracts/weights_file.h"
#include "worker/data/huggingface_weights.h"
#include "worker/data/random.h"

namespace shardwise {
namespace {

// nanoGPT's initial value of one GPT parameter.
double GptInitial(const ParameterDesc& param, int n_layer, Random& random) {
  const std::string& name = param.name;
  const bool layer_norm_weight = absl::StrContains(name, ".ln_") && absl::EndsWith(name, ".weight");
  if (absl::EndsWith(name, ".bias")) return 0.0;
  if (layer_norm_weight) return 1.0;
  const double std = absl::EndsWith(name, "c_proj.weight") ? 0.02 / std::sqrt(2.0 * n_layer) : 0.02;
  return std * random.Normal();
}

// HF LlamaPreTrainedModel._init_weights: Linear weights and embeddings normal(0,
// initializer_range), biases 0, RMSNorm weights 1.
double LlamaInitial(const ParameterDesc& param, double initializer_range, Random& random) {
  if (absl::EndsWith(param.name, ".bias")) return 0.0;
  if (absl::EndsWith(param.name, "norm.weight")) return 1.0;
  return initializer_range * random.Normal();
}

}  // namespace

absl::Status SeededWeights(const v1::ModelSpec& model, uint64_t seed, ParameterReceiver& receiver) {
  auto description = DescribeModel(model);
  if (!description.ok()) return description.status();
  Random random(seed);
  std::vector<float> values;
  for (const ParameterDesc& param : description->params) {
    values.resize(param.numel());
    if (model.has_gpt()) {
      for (float& v : values)
        v = static_cast<float>(GptInitial(param, model.gpt().n_layer(), random));
    } else if (model.has_llama()) {
      const double range = WithLlamaDefaults(model.llama()).initializer_range();
      for (float& v : values) v = static_cast<float>(LlamaInitial(param, range, random));
    } else {
      // Linear k's fan-in is its weight's second dimension.
      const int64_t in = model.layer_widths(description->modules[param.module].index);
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      for (float& v : values) v = static_cast<float>(random.Uniform(-bound, bound));
    }
    const ElementRange wanted = WantedWithin(receiver, param.name, param.numel());
    RETURN_IF_ERROR(receiver.Take(param.name, PieceOfWhole(param.shape, wanted, values.data())));
  }
  return absl::OkStatus();
}

TensorMap SeededWeights(const v1::ModelSpec& model, uint64_t seed) {
  return CollectTensors(
             [&](ParameterReceiver& receiver) { return SeededWeights(model, seed, receiver); })
      .value_or(TensorMap());
}

absl::Status InitialWeights(const v1::JobSpec& spec, ParameterReceiver& receiver) {
  if (spec.init().has_huggingface()) {
    return ReadHuggingFaceWeights(spec.model(), spec.init().huggingface(), receiver);
  }
  if (!spec.init().has_safetensors_path()) {
    return SeededWeights(spec.model(), spec.init().seed(), receiver);
  }
  const std::string& path = spec.init().safetensors_path();
  auto description = DescribeModel(spec.model());
  if (!description.ok()) return description.status();
  absl::Status read = ReadWeightsFile(*description, path, kCheckedPathLinks, receiver);
  if (absl::IsInvalidArgument(read)) {
    return absl::InvalidArgumentError(absl::StrCat("init.safetensors_path ", read.message()));
  }
  return read;
}

absl::StatusOr<TensorMap> InitialWeights(const v1::JobSpec& spec) {
  return CollectTensors(
      [&](ParameterReceiver& receiver) { return InitialWeights(spec, receiver); });
}

}  // namespace shardwise
