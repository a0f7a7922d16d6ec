#include "worker/model/sampler.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/model_description.h"
#include "contracts/transformer_config.h"
#include "worker/compute/cpu/cpu_device.h"
#include "worker/compute/cpu/gemm.h"
#include "worker/data/random.h"
#include "worker/model/host_parameters.h"
#include "worker/model/model.h"

namespace shardwise::model {
namespace {

// The next id from the last position's logits.
int64_t Choose(const float* logits, int64_t vocab, const SampleOptions& options, Random& random) {
  if (options.temperature <= 0) return std::max_element(logits, logits + vocab) - logits;
  std::vector<int64_t> order(vocab);
  for (int64_t i = 0; i < vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (options.top_k > 0 && options.top_k < vocab) order.resize(options.top_k);
  std::vector<double> weights;
  double total = 0;
  for (int64_t id : order) {
    weights.push_back(std::exp((logits[id] - logits[order[0]]) / options.temperature));
    total += weights.back();
  }
  double draw = random.Uniform() * total;
  for (size_t i = 0; i < order.size(); ++i) {
    if ((draw -= weights[i]) < 0) return order[i];
  }
  return order.back();
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> Generate(const v1::ModelSpec& model, const TensorMap& weights,
                                              const std::vector<int64_t>& prompt,
                                              const SampleOptions& options) {
  if (!IsTransformer(model)) {
    return absl::InvalidArgumentError("sampling needs a transformer (model.gpt or model.llama)");
  }
  const int64_t vocab_size = VocabSize(model), block_size = BlockSize(model);
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  for (int64_t id : prompt) {
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt id ", id, " is outside the vocabulary of ", vocab_size));
    }
  }
  ASSIGN_OR_RETURN(const ModelDescription description, DescribeModel(model));
  ASSIGN_OR_RETURN(HostParameters params, HostParameters::FromTensors(description, weights));
  v1::JobSpec spec;
  *spec.mutable_model() = model;
  cpu::SetBlasThreads(1);
  // Before the model: what the model keeps on the device (the Llama's rotary tables) is
  // freed into this allocator when the model goes.
  CpuCachingAllocator allocator;
  CpuDevice device(&allocator);
  ASSIGN_OR_RETURN(std::unique_ptr<Model> lm, Model::Create(spec, description));
  Random random(options.seed);
  std::vector<int64_t> ids = prompt;
  for (int64_t n = 0; n < options.tokens; ++n) {
    const int64_t length = std::min<int64_t>(static_cast<int64_t>(ids.size()), block_size);
    MicroBatch batch;
    batch.sequences = 1;
    batch.sequence_length = length;
    batch.rows = length;
    batch.tokens.assign(ids.end() - length, ids.end());
    lm->Begin(batch, &device, ScalarType::kFloat32);
    for (int s = 0; s < lm->num_stages(); ++s) {
      lm->Forward(s, params);
      lm->DropSaved(s);
    }
    const float* logits = lm->output().data() + (length - 1) * vocab_size;
    ids.push_back(Choose(logits, vocab_size, options, random));
    lm->End();
  }
  return ids;
}

}  // namespace shardwise::model
