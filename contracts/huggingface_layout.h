#ifndef SHARDWISE_CONTRACTS_HUGGINGFACE_LAYOUT_H_
#define SHARDWISE_CONTRACTS_HUGGINGFACE_LAYOUT_H_

// Hugging Face checkpoints of the transformer kinds: where each of a model's parameters
// lies in one (init.huggingface), and what a checkpoint Shardwise writes holds
// (output.huggingface_dir). Pure layout and header reading: the coordinator checks a
// checkpoint at submission from its headers, the workers read its tensors
// (worker/data/huggingface_weights.h).
//
// Names (docs/job-spec.md, "Hugging Face checkpoints"):
// - Llama: HF's LlamaForCausalLM names are the model's own state-dict names. Meta's
//   original layout maps tok_embeddings.weight, layers.N.attention.w{q,k,v,o}.weight,
//   layers.N.feed_forward.w{1,3,2}.weight (gate, up, down), layers.N.attention_norm and
//   ffn_norm, norm.weight and output.weight, with each head's q and k rows in Meta's
//   interleaved rotary order: row 2i + p of a head is HF's row p * head_dim / 2 + i. No
//   config.json is read: the spec gives the model, from Meta's params.json (dim =
//   hidden_size, n_layers = num_hidden_layers, n_heads = num_attention_heads, n_kv_heads =
//   num_key_value_heads, norm_eps = rms_norm_eps, rope_theta, use_scaled_rope = llama3
//   rope_scaling).
// - GPT: GPT2LMHeadModel's names are nanoGPT's ("transformer.h.N.attn.c_attn.weight"),
//   with or without the "transformer." prefix (GPT2Model saves without), and the weights
//   of c_attn, c_proj and c_fc stored transposed ([in, out], GPT-2's Conv1D).
// Keys HF's own loading ignores are ignored: rotary_emb.inv_freq, GPT-2's attn.bias and
// attn.masked_bias buffers, and a tied lm_head.weight.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "contracts/safetensors.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// One of the model's parameters in a checkpoint.
struct HuggingFaceTensor {
  std::string param;              // the model's state-dict name
  std::string key;                // the checkpoint's name
  std::vector<int64_t> shape;     // as stored
  bool transposed = false;        // GPT-2's Conv1D weights: stored [in, out]
  int64_t interleaved_heads = 0;  // Meta's q and k: the heads whose rows are interleaved
};

// Every parameter of `model` (a GPT or a Llama) as `layout` stores it; INVALID_ARGUMENT
// naming `field` for a model the layout cannot hold (a GPT without biases, META for a GPT).
absl::StatusOr<std::vector<HuggingFaceTensor>> HuggingFaceTensors(
    const v1::ModelSpec& model, v1::HuggingFaceCheckpoint::Layout layout, const std::string& field);

// A tensor of a checkpoint: the file that holds it and where.
struct LocatedTensor {
  HuggingFaceTensor tensor;  // key as the checkpoint spells it
  std::string file;
  SafetensorsEntry entry;
};

// Reads the checkpoint's headers (model.safetensors, or the shards its
// model.safetensors.index.json names) and its config.json (HUGGING_FACE layout), and
// finds every parameter: INVALID_ARGUMENT naming `field` and the key for a missing tensor,
// a wrong shape, a dtype other than F32, BF16 and F16, a key the model does not have, or a
// config.json that describes another model; NOT_FOUND naming the file that is missing.
// The folder's path is opened as `links` says, the files in it never through a link
// (common/untrusted_file.h: InsideFolder).
absl::StatusOr<std::vector<LocatedTensor>> LocateHuggingFaceTensors(
    const v1::ModelSpec& model, const v1::HuggingFaceCheckpoint& checkpoint,
    const std::string& field, Links links);

// The BOS and EOS ids of a job's tokenizer (tokenizer/manifest.h): nullopt where it has
// none, or the job has no tokenizer.
struct SpecialTokenIds {
  std::optional<int32_t> bos, eos;
};

// The config.json of `model` for from_pretrained (LlamaForCausalLM or GPT2LMHeadModel,
// FP32 weights), with `ids` as bos_token_id and eos_token_id (null where unknown, rather
// than the classes' defaults, which name other vocabularies' tokens).
std::string HuggingFaceConfigJson(const v1::ModelSpec& model, const SpecialTokenIds& ids = {});

// generation_config.json: the ids generate() starts from and stops at ("{}" without any).
std::string HuggingFaceGenerationConfigJson(const SpecialTokenIds& ids);

// The names in output.huggingface_dir that the job's export counts as its own:
// model.safetensors, config.json and model.safetensors.index.json (which would sit beside
// the weights naming others); with a tokenizer (data.tokens.tokenizer) also
// generation_config.json and every tokenizer file name (tokenizer/manifest.h). A folder
// holding one is refused at submission unless the spec says overwrite; an export that
// replaces an earlier one removes those it does not write.
std::vector<std::string> HuggingFaceExportNames(const v1::JobSpec& spec);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_HUGGINGFACE_LAYOUT_H_
