#include "tokenizer/huggingface/normalizers.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/pattern.h"
#include "tokenizer/huggingface/unicode_text.h"
#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// The lead of `out`, `in` in normal form `form`. The library's normal forms align each
// character they make with the character it came from (a composed one with the first of
// those it joins): the lead's characters, normalised alone, begin `out`, unless a
// composition reaches past the lead, when the composed character joins it.
size_t LeadThroughNormalForm(const Piece& in, absl::string_view out, NormalForm form) {
  if (in.lead == 0) return 0;
  if (in.lead >= in.text.size()) return out.size();
  const std::string lead = Normalize(absl::string_view(in.text).substr(0, in.lead), form);
  size_t common = 0;
  while (common < lead.size() && common < out.size() && lead[common] == out[common]) ++common;
  if (common == lead.size()) return common;
  size_t start = common;  // the character where they part, which the composition made
  while (start > 0 && (static_cast<unsigned char>(out[start]) & 0xC0) == 0x80) --start;
  return std::min(out.size(), start + std::max<size_t>(1, Utf8CharLength(out.substr(start))));
}

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void Apply(Piece* text, bool /*stretch_begins_input*/) const override {
    std::string out = Normalize(text->text, form_);
    text->lead = LeadThroughNormalForm(*text, out, form_);
    text->text = std::move(out);
  }

 private:
  NormalForm form_;
};

class Lowercasing final : public Normalizer {
 public:
  void Apply(Piece* text, bool /*stretch_begins_input*/) const override {
    text->lead = LeadAfterRespelling(*text, Lowercase);
    text->text = Lowercase(text->text);
  }
};

// The library's replace aligns a match's content with the match's last byte (an empty
// match at the start: with nothing, the stretch's start), the text between matches with
// itself.
class Replacing final : public Normalizer {
 public:
  Replacing(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void Apply(Piece* text, bool stretch_begins_input) const override {
    std::string out;
    size_t lead = 0;
    bool leading = true;  // every byte so far is in the lead
    const auto add = [&](absl::string_view bytes, size_t in_lead) {
      out.append(bytes.data(), bytes.size());
      if (leading) lead += in_lead;
      leading = leading && in_lead == bytes.size();
    };
    for (const Match& match : pattern_.Find(text->text)) {
      const size_t start = static_cast<size_t>(match.text.data() - text->text.data());
      const size_t end = start + match.text.size();
      if (match.matched) {
        const bool aligned = end == 0 ? stretch_begins_input : end - 1 < text->lead;
        add(content_, aligned ? content_.size() : 0);
      } else {
        add(match.text, text->lead > start ? std::min(text->lead, end) - start : 0);
      }
    }
    text->text = std::move(out);
    text->lead = lead;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// The library's prepend aligns the new text with the first character.
class Prepending final : public Normalizer {
 public:
  explicit Prepending(std::string prepend) : prepend_(std::move(prepend)) {}
  void Apply(Piece* text, bool /*stretch_begins_input*/) const override {
    if (text->text.empty()) return;
    text->text = prepend_ + text->text;
    if (text->lead > 0) text->lead += prepend_.size();
  }

 private:
  std::string prepend_;
};

class Stripping final : public Normalizer {
 public:
  Stripping(bool left, bool right) : left_(left), right_(right) {}
  void Apply(Piece* text, bool /*stretch_begins_input*/) const override {
    size_t begin = 0, end = text->text.size(), position = 0;
    bool leading = true;
    ForEachCharacter(text->text, [&](char32_t c, absl::string_view bytes) {
      position += bytes.size();
      if (IsWhitespace(c)) {
        if (leading && left_) begin = position;
      } else {
        leading = false;
        end = position;
      }
    });
    if (!right_) end = text->text.size();
    if (leading && (left_ || right_)) begin = end = 0;  // all whitespace
    text->text = text->text.substr(begin, end - begin);
    text->lead = text->lead > begin ? std::min(text->lead - begin, end - begin) : 0;
  }

 private:
  bool left_, right_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void Apply(Piece* text, bool stretch_begins_input) const override {
    for (const auto& step : steps_) step->Apply(text, stretch_begins_input);
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

std::string Normalizer::Normalized(std::string text) const {
  Piece piece{std::move(text), 0};
  Apply(&piece, /*stretch_begins_input=*/false);
  return std::move(piece.text);
}

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
