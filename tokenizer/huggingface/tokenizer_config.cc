#include "tokenizer/huggingface/tokenizer_config.h"

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/json_fields.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// A special token's field: absent or null, a string, or {"content": string, ...}.
absl::StatusOr<std::optional<std::string>> SpecialToken(const nlohmann::json& json, const char* key,
                                                        const std::string& name) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    const auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": ", key, ": is ", ShownValue(it->dump()),
                   ", not a token's text (a string, or an object with a string \"content\")"));
}

}  // namespace

absl::StatusOr<TokenizerConfigTokens> ReadTokenizerConfig(absl::string_view text,
                                                          const std::string& name) {
  HF_ASSIGN_OR_RETURN(const nlohmann::json json, ParseJsonObject(text, name));
  TokenizerConfigTokens tokens;
  HF_ASSIGN_OR_RETURN(tokens.bos_token, SpecialToken(json, "bos_token", name));
  HF_ASSIGN_OR_RETURN(tokens.eos_token, SpecialToken(json, "eos_token", name));
  return tokens;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
