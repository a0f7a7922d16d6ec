#ifndef SHARDWISE_TOKENIZER_TRANSFORMERS_CONFIG_H_
#define SHARDWISE_TOKENIZER_TRANSFORMERS_CONFIG_H_

// What Hugging Face transformers needs, beside a tokenizer's own files, to load it with
// AutoTokenizer.from_pretrained: a tokenizer_config.json naming the class and the special
// tokens, and the BOS and EOS ids a model's config.json and generation_config.json
// carry. `shardwise tokenize` makes them when it writes a tokenizer folder (load.h), so
// that a job's export (output.huggingface_dir) only copies files.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

struct TransformersConfig {
  // "" for a kind transformers has no class for (bytes, tiktoken).
  std::string tokenizer_config_json;
  std::optional<int32_t> bos_id, eos_id;
};

// For a tokenizer of `kind`. The ids: the first of the document's prefix as BOS, the last
// of its suffix as EOS; with no prefix, the suffix's token is BOS too (GPT-2's
// <|endoftext|> is both). The tokenizer_config.json per kind:
//   sentencepiece: LlamaTokenizer (legacy: the model's own encoding), with add_bos_token
//                  and add_eos_token as the token files have them;
//   gpt2:          GPT2Tokenizer, <|endoftext|> as BOS, EOS and unknown token;
//   huggingface:   the user's tokenizer_config.json as it is, when `user_config` holds
//                  one (its bos_token and eos_token give the ids: INVALID_ARGUMENT naming
//                  the field when the tokenizer has no such token), else
//                  PreTrainedTokenizerFast with the ids' tokens.
// `user_config` is for huggingface only (INVALID_ARGUMENT for another kind).
struct UserConfig {
  std::string name;  // the file, for errors
  std::string bytes;
};
absl::StatusOr<TransformersConfig> MakeTransformersConfig(const std::string& kind,
                                                          const Tokenizer& tokenizer,
                                                          const UserConfig* user_config);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_TRANSFORMERS_CONFIG_H_
