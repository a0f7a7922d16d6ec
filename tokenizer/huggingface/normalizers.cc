#include "tokenizer/huggingface/normalizers.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/pattern.h"
#include "tokenizer/huggingface/unicode_text.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  std::string Apply(std::string text) const override { return Normalize(text, form_); }

 private:
  NormalForm form_;
};

class Lowercasing final : public Normalizer {
 public:
  std::string Apply(std::string text) const override { return Lowercase(text); }
};

class Replacing final : public Normalizer {
 public:
  Replacing(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string Apply(std::string text) const override { return pattern_.Replace(text, content_); }

 private:
  Pattern pattern_;
  std::string content_;
};

class Prepending final : public Normalizer {
 public:
  explicit Prepending(std::string prepend) : prepend_(std::move(prepend)) {}
  std::string Apply(std::string text) const override {
    return text.empty() ? text : prepend_ + text;
  }

 private:
  std::string prepend_;
};

class Stripping final : public Normalizer {
 public:
  Stripping(bool left, bool right) : left_(left), right_(right) {}
  std::string Apply(std::string text) const override {
    size_t begin = 0, end = text.size(), position = 0;
    bool leading = true;
    ForEachCharacter(text, [&](char32_t c, absl::string_view bytes) {
      position += bytes.size();
      if (IsWhitespace(c)) {
        if (leading && left_) begin = position;
      } else {
        leading = false;
        end = position;
      }
    });
    if (!right_) end = text.size();
    if (leading) return left_ || right_ ? std::string() : text;  // all whitespace
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  std::string Apply(std::string text) const override {
    for (const auto& step : steps_) text = step->Apply(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

absl::StatusOr<std::unique_ptr<Normalizer>> SequenceFromJson(const nlohmann::json& json,
                                                             const std::string& path) {
  const nlohmann::json* items = Field(json, "normalizers");
  if (items == nullptr || !items->is_array()) {
    return JsonError(path + ".normalizers", "is not an array");
  }
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (size_t i = 0; i < items->size(); ++i) {
    HF_ASSIGN_OR_RETURN(
        auto step, NormalizerFromJson((*items)[i], absl::StrCat(path, ".normalizers[", i, "]")));
    if (step != nullptr) steps.push_back(std::move(step));
  }
  return std::unique_ptr<Normalizer>(new Sequence(std::move(steps)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& json,
                                                               const std::string& path) {
  if (json.is_null()) return std::unique_ptr<Normalizer>();
  HF_ASSIGN_OR_RETURN(const std::string type, TypeOf(json, path));
  if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeForm(NormalForm::kNfc));
  if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeForm(NormalForm::kNfd));
  if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeForm(NormalForm::kNfkc));
  if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeForm(NormalForm::kNfkd));
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(new Lowercasing());
  if (type == "Sequence") return SequenceFromJson(json, path);
  if (type == "Replace") {
    const nlohmann::json* pattern_json = Field(json, "pattern");
    if (pattern_json == nullptr) return JsonError(path + ".pattern", "is missing");
    HF_ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromJson(*pattern_json, path + ".pattern"));
    HF_ASSIGN_OR_RETURN(std::string content, StringField(json, "content", path, std::nullopt));
    return std::unique_ptr<Normalizer>(new Replacing(std::move(pattern), std::move(content)));
  }
  if (type == "Prepend") {
    HF_ASSIGN_OR_RETURN(std::string prepend, StringField(json, "prepend", path, std::nullopt));
    return std::unique_ptr<Normalizer>(new Prepending(std::move(prepend)));
  }
  if (type == "Strip") {
    HF_ASSIGN_OR_RETURN(const bool left, BoolField(json, "strip_left", path, true));
    HF_ASSIGN_OR_RETURN(const bool right, BoolField(json, "strip_right", path, true));
    return std::unique_ptr<Normalizer>(new Stripping(left, right));
  }
  return JsonError(path, absl::StrCat("a normalizer of type \"", ShownValue(type),
                                      "\" is not supported (NFC, NFD, NFKC, NFKD, Lowercase, "
                                      "Replace, Prepend, Strip and Sequence are)"));
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
