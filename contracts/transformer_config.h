#ifndef SHARDWISE_CONTRACTS_TRANSFORMER_CONFIG_H_
#define SHARDWISE_CONTRACTS_TRANSFORMER_CONFIG_H_

// What the readers of either transformer kind (model.gpt, model.llama) need without caring
// which it is: the token pipeline, validation, the memory estimate and the sampler read a
// vocabulary and a sequence length; and the Llama's defaults, filled in one place.

#include <cstdint>
#include <string>

#include "proto/job_spec.pb.h"

namespace shardwise {

// A GPT or a Llama: a model that trains on token files.
bool IsTransformer(const v1::ModelSpec& model);

// The spec's field of the model's kind, for messages: "model.gpt", "model.llama" or
// "model.layer_widths".
std::string ModelField(const v1::ModelSpec& model);

// A transformer's vocabulary and training sequence length (block_size, the Llama's
// defaulted); 0 for the MLP.
int64_t VocabSize(const v1::ModelSpec& model);
int64_t BlockSize(const v1::ModelSpec& model);
int64_t HiddenSize(const v1::ModelSpec& model);

// The Llama's defaults (docs/job-spec.md): HF LlamaConfig's, and block_size
// max_position_embeddings. Every reader of model.llama reads it through this.
inline constexpr int64_t kLlamaDefaultMaxPositions = 2048;
v1::LlamaConfig WithLlamaDefaults(const v1::LlamaConfig& llama);

// Whether the Llama's rotary frequencies take rope_scaling's llama3 rule.
bool HasLlama3RopeScaling(const v1::LlamaConfig& llama);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_TRANSFORMER_CONFIG_H_
