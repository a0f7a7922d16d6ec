#include "contracts/transformer_config.h"

namespace shardwise {

bool IsTransformer(const v1::ModelSpec& model) { return model.has_gpt() || model.has_llama(); }

std::string ModelField(const v1::ModelSpec& model) {
  if (model.has_gpt()) return "model.gpt";
  if (model.has_llama()) return "model.llama";
  return "model.layer_widths";
}

int64_t VocabSize(const v1::ModelSpec& model) {
  if (model.has_gpt()) return model.gpt().vocab_size();
  if (model.has_llama()) return model.llama().vocab_size();
  return 0;
}

int64_t BlockSize(const v1::ModelSpec& model) {
  if (model.has_gpt()) return model.gpt().block_size();
  if (model.has_llama()) return WithLlamaDefaults(model.llama()).block_size();
  return 0;
}

int64_t HiddenSize(const v1::ModelSpec& model) {
  if (model.has_gpt()) return model.gpt().n_embd();
  if (model.has_llama()) return model.llama().hidden_size();
  return 0;
}

v1::LlamaConfig WithLlamaDefaults(const v1::LlamaConfig& llama) {
  v1::LlamaConfig c = llama;
  if (c.num_key_value_heads() == 0) c.set_num_key_value_heads(c.num_attention_heads());
  if (c.head_dim() == 0 && c.num_attention_heads() > 0) {
    c.set_head_dim(c.hidden_size() / c.num_attention_heads());
  }
  if (c.max_position_embeddings() == 0) c.set_max_position_embeddings(kLlamaDefaultMaxPositions);
  if (c.block_size() == 0) c.set_block_size(c.max_position_embeddings());
  if (!c.has_rms_norm_eps()) c.set_rms_norm_eps(1e-6);
  if (!c.has_rope_theta()) c.set_rope_theta(10000.0);
  if (!c.has_tie_word_embeddings()) c.set_tie_word_embeddings(false);
  if (!c.has_initializer_range()) c.set_initializer_range(0.02);
  if (c.hidden_act().empty()) c.set_hidden_act("silu");
  if (c.attention() == v1::GptConfig::ATTENTION_UNSPECIFIED) {
    c.set_attention(v1::GptConfig::MATERIALIZED);
  }
  if (c.has_rope_scaling()) {
    v1::RopeScaling* scaling = c.mutable_rope_scaling();
    if (scaling->rope_type().empty()) scaling->set_rope_type(scaling->type());
    scaling->clear_type();
    // HF writes "default" for no scaling. A block that names no type stays, for the check
    // to refuse: transformers cannot build a model from it either (no rotary function).
    if (scaling->rope_type() == "default") c.clear_rope_scaling();
  }
  return c;
}

bool HasLlama3RopeScaling(const v1::LlamaConfig& llama) {
  return llama.rope_scaling().rope_type() == "llama3" || llama.rope_scaling().type() == "llama3";
}

}  // namespace shardwise
