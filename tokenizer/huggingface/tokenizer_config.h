#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_CONFIG_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_CONFIG_H_

// Hugging Face's tokenizer_config.json, the file transformers reads beside tokenizer.json
// (which class, the special tokens, the chat template). Shardwise keeps the user's file
// as it is and exports it with the model (output.huggingface_dir); of its fields it reads
// only the BOS and EOS tokens, for the model's config.json and generation_config.json.

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

struct TokenizerConfigTokens {
  // The tokens' text; nullopt where the file leaves the field out or sets it to null.
  std::optional<std::string> bos_token, eos_token;
};

// "bos_token" and "eos_token", each a string, null, or an AddedToken object with a string
// "content" (as transformers writes them). INVALID_ARGUMENT naming `name` and the field
// for anything else, for text that is no JSON object, or nesting past 64 levels.
absl::StatusOr<TokenizerConfigTokens> ReadTokenizerConfig(absl::string_view text,
                                                          const std::string& name);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_TOKENIZER_CONFIG_H_
