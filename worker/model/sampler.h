#ifndef SHARDWISE_WORKER_MODEL_SAMPLER_H_
#define SHARDWISE_WORKER_MODEL_SAMPLER_H_

// Text generation from a trained GPT on the CPU (`shardwise sample`): the model runs on
// the context (the last block_size tokens), and the next token is the most likely one
// (temperature 0) or drawn from softmax(logits / temperature), optionally among the
// top_k most likely, with Shardwise's seeded generator (data/random.h). No KV cache: each
// token runs the whole context again, which is fine for the small models it serves.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"

namespace shardwise::model {

struct SampleOptions {
  int64_t tokens = 200;      // how many to generate
  double temperature = 1.0;  // 0: greedy
  int top_k = 0;             // 0: the whole vocabulary
  uint64_t seed = 0;
};

// The `prompt` (at least one id) followed by the generated ids. INVALID_ARGUMENT when the
// weights do not fit `model` (a GPT) or a prompt id is out of its vocabulary.
absl::StatusOr<std::vector<int64_t>> Generate(const v1::ModelSpec& model, const TensorMap& weights,
                                              const std::vector<int64_t>& prompt,
                                              const SampleOptions& options);

}  // namespace shardwise::model

#endif  // SHARDWISE_WORKER_MODEL_SAMPLER_H_
