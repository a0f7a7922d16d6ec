#include "tokenizer/transformers_config.h"

#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/huggingface_tokenizer.h"
#include "tokenizer/huggingface/tokenizer_config.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace shardwise {
namespace tokenizer {
namespace {

using Json = nlohmann::json;

// The ids around a document: BOS its prefix's first, EOS its suffix's last, and a lone
// suffix token both (GPT-2's convention: its config.json has 50256 for both).
void DocumentIds(const Tokenizer& tokenizer, TransformersConfig* config) {
  const std::vector<int32_t> prefix = tokenizer.DocumentPrefix();
  const std::vector<int32_t> suffix = tokenizer.DocumentSuffix();
  if (!suffix.empty()) config->eos_id = suffix.back();
  config->bos_id = prefix.empty() ? config->eos_id : std::optional<int32_t>(prefix.front());
}

// A token's text for tokenizer_config.json, or null.
Json TokenText(const Tokenizer& tokenizer, std::optional<int32_t> id) {
  if (!id.has_value()) return nullptr;
  const std::optional<std::string> text = tokenizer.SpecialTokenText(*id);
  return text.has_value() ? Json(*text) : Json(nullptr);
}

std::string ConfigText(const Json& json) { return json.dump(2) + "\n"; }

// transformers' LlamaTokenizer is its class for a bare SentencePiece model; `legacy`
// keeps SentencePiece's own encoding (no extra handling of the text after a special
// token).
std::string SentencePieceConfig(const SentencePieceTokenizer& tokenizer,
                                const TransformersConfig& ids) {
  const Json bos = TokenText(tokenizer, ids.bos_id);
  const Json eos = TokenText(tokenizer, ids.eos_id);
  std::optional<int32_t> unknown;
  if (tokenizer.unknown_id() >= 0) unknown = tokenizer.unknown_id();
  return ConfigText({{"tokenizer_class", "LlamaTokenizer"},
                     {"bos_token", bos},
                     {"eos_token", eos},
                     {"unk_token", TokenText(tokenizer, unknown)},
                     {"pad_token", nullptr},
                     {"add_bos_token", !tokenizer.DocumentPrefix().empty() && !bos.is_null()},
                     {"add_eos_token", !tokenizer.DocumentSuffix().empty() && !eos.is_null()},
                     {"legacy", true},
                     {"sp_model_kwargs", Json::object()},
                     {"clean_up_tokenization_spaces", false}});
}

std::string Gpt2Config(const Tokenizer& tokenizer, const TransformersConfig& ids) {
  const Json end = TokenText(tokenizer, ids.eos_id);
  return ConfigText({{"tokenizer_class", "GPT2Tokenizer"},
                     {"bos_token", end},
                     {"eos_token", end},
                     {"unk_token", end},
                     {"add_prefix_space", false},
                     {"add_bos_token", false},
                     {"errors", "replace"},
                     {"clean_up_tokenization_spaces", false}});
}

// The user's tokenizer_config.json names the special tokens by their text; the ids are
// the tokenizer's for that text.
absl::Status IdsFromUserConfig(const HuggingFaceTokenizer& tokenizer, const UserConfig& user,
                               TransformersConfig* config) {
  auto tokens = hf::ReadTokenizerConfig(user.bytes, user.name);
  if (!tokens.ok()) return tokens.status();
  for (const auto& [field, text, id] :
       {std::tuple("bos_token", &tokens->bos_token, &config->bos_id),
        std::tuple("eos_token", &tokens->eos_token, &config->eos_id)}) {
    if (!text->has_value()) continue;
    *id = tokenizer.TokenId(**text);
    if (!id->has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat(user.name, ": ", field, " \"", ShownValue(**text),
                       "\" is no token of the tokenizer.json it came with"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TransformersConfig> MakeTransformersConfig(const std::string& kind,
                                                          const Tokenizer& tokenizer,
                                                          const UserConfig* user_config) {
  TransformersConfig config;
  DocumentIds(tokenizer, &config);
  if (user_config != nullptr && kind != "huggingface") {
    return absl::InvalidArgumentError(absl::StrCat(
        user_config->name, ": a tokenizer_config.json goes with a huggingface tokenizer, not ",
        ShownValue(kind)));
  }
  if (kind == "sentencepiece") {
    // Only a sentencepiece kind's tokenizer is a SentencePieceTokenizer (load.cc).
    config.tokenizer_config_json =
        SentencePieceConfig(static_cast<const SentencePieceTokenizer&>(tokenizer), config);
  } else if (kind == "gpt2") {
    config.tokenizer_config_json = Gpt2Config(tokenizer, config);
  } else if (kind == "huggingface" && user_config != nullptr) {
    // Only a huggingface kind's tokenizer is a HuggingFaceTokenizer (load.cc makes it).
    const auto& hugging_face = static_cast<const HuggingFaceTokenizer&>(tokenizer);
    if (absl::Status ids = IdsFromUserConfig(hugging_face, *user_config, &config); !ids.ok()) {
      return ids;
    }
    config.tokenizer_config_json = user_config->bytes;
  } else if (kind == "huggingface") {
    config.tokenizer_config_json = ConfigText({{"tokenizer_class", "PreTrainedTokenizerFast"},
                                               {"bos_token", TokenText(tokenizer, config.bos_id)},
                                               {"eos_token", TokenText(tokenizer, config.eos_id)},
                                               {"clean_up_tokenization_spaces", false}});
  }
  return config;
}

}  // namespace tokenizer
}  // namespace shardwise
