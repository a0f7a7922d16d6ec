#include "tokenizer/huggingface/huggingface_tokenizer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tokenizer/huggingface/cut_safety.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/tokenizer_json.h"
#include "tokenizer/huggingface/unicode_text.h"

namespace shardwise {
namespace tokenizer {

using hf::Field;
using hf::JsonError;
using hf::ShownJson;

absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> HuggingFaceTokenizer::FromJson(
    absl::string_view text, const std::string& name) {
  HF_ASSIGN_OR_RETURN(hf::TokenizerJson read, hf::ReadTokenizerJson(text, name));
  const nlohmann::json& json = read.document;
  std::unique_ptr<HuggingFaceTokenizer> tokenizer(new HuggingFaceTokenizer());
  const auto named = [&](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
  };
  const nlohmann::json null;
  const auto field = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json* found = Field(json, key);
    return found != nullptr ? *found : null;
  };
  auto normalizer = hf::NormalizerFromJson(field("normalizer"), "normalizer");
  if (!normalizer.ok()) return named(normalizer.status());
  tokenizer->normalizer_ = std::move(*normalizer);
  auto pre_tokenizer = hf::PreTokenizerFromJson(field("pre_tokenizer"), "pre_tokenizer");
  if (!pre_tokenizer.ok()) return named(pre_tokenizer.status());
  tokenizer->pre_tokenizer_ = std::move(*pre_tokenizer);
  auto decoder = hf::DecoderFromJson(field("decoder"), "decoder");
  if (!decoder.ok()) return named(decoder.status());
  tokenizer->decoder_ = std::move(*decoder);
  auto type = hf::TypeOf(field("model"), "model");
  if (!type.ok()) return named(type.status());
  if (*type != "BPE") {
    return named(JsonError("model.type", absl::StrCat("a model of type \"", ShownValue(*type),
                                                      "\" is not supported (BPE is)")));
  }
  auto model = hf::BpeModel::FromJson(field("model"), std::move(read.model), "model");
  if (!model.ok()) return named(model.status());
  tokenizer->model_ = std::make_unique<hf::BpeModel>(std::move(*model));
  auto added = hf::AddedTokens::FromJson(field("added_tokens"), "added_tokens",
                                         tokenizer->normalizer_.get(), *tokenizer->model_);
  if (!added.ok()) return named(added.status());
  tokenizer->added_ = std::move(*added);
  if (absl::Status post = tokenizer->ReadPostProcessor(field("post_processor"), "post_processor");
      !post.ok()) {
    return named(post);
  }
  tokenizer->vocab_size_ = tokenizer->model_->size();
  for (const hf::AddedToken& token : tokenizer->added_.tokens()) {
    tokenizer->vocab_size_ = std::max<int64_t>(tokenizer->vocab_size_, token.id + 1);
  }
  // The post-processor's ids are the file's to choose, as the library takes them: a
  // document's prefix and suffix count too, so a model's vocab_size is checked against
  // every id the token files may hold.
  for (const std::vector<int32_t>* ids : {&tokenizer->prefix_, &tokenizer->suffix_}) {
    for (const int32_t id : *ids) {
      tokenizer->vocab_size_ = std::max<int64_t>(tokenizer->vocab_size_, int64_t{id} + 1);
    }
  }
  tokenizer->keeps_ids_at_cuts_ =
      hf::CutsKeepIds(tokenizer->normalizer_.get(), tokenizer->pre_tokenizer_.get(),
                      *tokenizer->model_, tokenizer->added_);
  return tokenizer;
}

absl::Status HuggingFaceTokenizer::ReadPostProcessor(const nlohmann::json& json,
                                                     const std::string& path) {
  if (json.is_null()) return absl::OkStatus();
  HF_ASSIGN_OR_RETURN(const std::string type, hf::TypeOf(json, path));
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only
  if (type == "Sequence") {
    const nlohmann::json* items = Field(json, "processors");
    if (items == nullptr || !items->is_array()) {
      return JsonError(path + ".processors", "is not an array");
    }
    for (size_t i = 0; i < items->size(); ++i) {
      HF_RETURN_IF_ERROR(
          ReadPostProcessor((*items)[i], absl::StrCat(path, ".processors[", i, "]")));
    }
    return absl::OkStatus();
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const nlohmann::json* pair = Field(json, key);
      if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
        return JsonError(absl::StrCat(path, ".", key), "is not a [token, id] pair");
      }
      HF_ASSIGN_OR_RETURN(const int32_t id,
                          hf::IdValue((*pair)[1], absl::StrCat(path, ".", key, "[1]")));
      (std::string(key) == "cls" ? prefix_ : suffix_).push_back(id);
    }
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing") {
    return JsonError(path, absl::StrCat("a post_processor of type \"", ShownValue(type),
                                        "\" is not supported (TemplateProcessing, ByteLevel, "
                                        "BertProcessing, RobertaProcessing and Sequence are)"));
  }
  const nlohmann::json* single = Field(json, "single");
  const nlohmann::json* specials = Field(json, "special_tokens");
  if (single == nullptr || !single->is_array())
    return JsonError(path + ".single", "is not an array");
  bool after_sequence = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string where = absl::StrCat(path, ".single[", i, "]");
    const nlohmann::json& piece = (*single)[i];
    if (Field(piece, "Sequence") != nullptr) {
      after_sequence = true;
      continue;
    }
    const nlohmann::json* special = Field(piece, "SpecialToken");
    const nlohmann::json* name = special != nullptr ? Field(*special, "id") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return JsonError(where,
                       absl::StrCat("is ", ShownJson(piece), ", not a Sequence or a SpecialToken"));
    }
    const nlohmann::json* entry =
        specials != nullptr ? Field(*specials, name->get<std::string>().c_str()) : nullptr;
    const nlohmann::json* ids = entry != nullptr ? Field(*entry, "ids") : nullptr;
    if (ids == nullptr || !ids->is_array()) {
      return JsonError(
          path + ".special_tokens",
          absl::StrCat("has no ids for \"", ShownValue(name->get<std::string>()), "\""));
    }
    for (size_t k = 0; k < ids->size(); ++k) {
      HF_ASSIGN_OR_RETURN(const int32_t id,
                          hf::IdValue((*ids)[k], absl::StrCat(where, ".ids[", k, "]")));
      (after_sequence ? suffix_ : prefix_).push_back(id);
    }
  }
  return absl::OkStatus();
}

void HuggingFaceTokenizer::Encode(std::string_view text, bool document_start,
                                  std::vector<int32_t>* ids) const {
  const std::string valid = hf::ValidUtf8(absl::string_view(text.data(), text.size()));
  bool first = document_start;
  added_.Split(
      valid, /*normalized=*/false,
      [&](int32_t id) {
        ids->push_back(id);
        first = false;
      },
      [&](absl::string_view stretch) {
        EncodeStretch(stretch, first && stretch.data() == valid.data(), ids);
        first = false;
      });
}

void HuggingFaceTokenizer::EncodeStretch(absl::string_view stretch, bool at_start,
                                         std::vector<int32_t>* ids) const {
  hf::Piece normalized = hf::StretchPiece(stretch, at_start);
  if (normalizer_ != nullptr) normalizer_->Apply(&normalized, at_start);
  added_.Split(
      normalized.text, /*normalized=*/true, [&](int32_t id) { ids->push_back(id); },
      [&](absl::string_view part) {
        // The library cuts the normalised stretch here even where no added token is.
        EncodePieces(hf::Slice(normalized, part), ids);
      });
}

void HuggingFaceTokenizer::EncodePieces(hf::Piece piece, std::vector<int32_t>* ids) const {
  std::vector<hf::Piece> pieces = {std::move(piece)};
  if (pre_tokenizer_ != nullptr) pre_tokenizer_->Apply(&pieces);
  for (const hf::Piece& each : pieces) model_->Encode(each.text, ids);
}

std::optional<std::string> HuggingFaceTokenizer::SpecialTokenText(int32_t id) const {
  if (const hf::AddedToken* added = added_.ById(id)) return added->content;
  // A template may put a token of the model's own around a document.
  const bool around = std::find(prefix_.begin(), prefix_.end(), id) != prefix_.end() ||
                      std::find(suffix_.begin(), suffix_.end(), id) != suffix_.end();
  const std::string* token = around ? model_->Token(id) : nullptr;
  if (token == nullptr) return std::nullopt;
  return *token;
}

std::optional<int32_t> HuggingFaceTokenizer::TokenId(absl::string_view text) const {
  if (std::optional<int32_t> added = added_.IdOf(text)) return added;
  return model_->Id(text);
}

std::string HuggingFaceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const hf::AddedToken* added = added_.ById(id)) {
      tokens.push_back(added->content);
    } else if (const std::string* token = model_->Token(id)) {
      tokens.push_back(*token);
    } else {
      tokens.push_back(absl::StrCat("<", id, ">"));
    }
  }
  if (decoder_ == nullptr) return absl::StrJoin(tokens, " ");
  return absl::StrJoin(decoder_->DecodeChain(std::move(tokens)), "");
}

}  // namespace tokenizer
}  // namespace shardwise
