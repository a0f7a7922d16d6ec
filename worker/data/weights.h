#ifndef SHARDWISE_WORKER_DATA_WEIGHTS_H_
#define SHARDWISE_WORKER_DATA_WEIGHTS_H_

// A model's weights by their state-dict names (contracts/model_description.h): seeded with
// PyTorch's (MLP), nanoGPT's (GPT) or Hugging Face's (Llama) initialisation, or read from a
// safetensors file and checked against the model.

#include <cstdint>

#include "absl/status/statusor.h"
#include "contracts/safetensors.h"
#include "contracts/weights_file.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// From one generator seeded with `seed`, parameter after parameter in registration order:
// - MLP: every weight and bias uniform in ±1/sqrt(in) (nn.Linear's default);
// - GPT (nanoGPT's _init_weights): Linear weights and embeddings normal(0, 0.02), the
//   residual projections (c_proj.weight) normal(0, 0.02 / sqrt(2 * n_layer)), biases 0,
//   LayerNorm weights 1;
// - Llama (HF's _init_weights): Linear weights and embeddings normal(0, initializer_range),
//   biases 0, RMSNorm weights 1.
// The model must be valid (DescribeModel succeeds). Given to `receiver` a parameter at a
// time (each generated whole, as the generator's sequence runs through it).
absl::Status SeededWeights(const v1::ModelSpec& model, uint64_t seed, ParameterReceiver& receiver);
// The same, collected.
TensorMap SeededWeights(const v1::ModelSpec& model, uint64_t seed);

// The job's initial weights, given to `receiver` a parameter at a time (F32, the model's
// layout), what it wants of each, so that a rank holds that besides its shards:
// from init.huggingface (huggingface_weights.h), from init.safetensors_path
// (contracts/weights_file.h: every tensor the model needs, F32, with its shape;
// INVALID_ARGUMENT naming the field and the tensor otherwise) or init.seed.
absl::Status InitialWeights(const v1::JobSpec& spec, ParameterReceiver& receiver);
// The same, collected (a reference run, a test).
absl::StatusOr<TensorMap> InitialWeights(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_WEIGHTS_H_
