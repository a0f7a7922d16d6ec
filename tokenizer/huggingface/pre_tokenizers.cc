#include "tokenizer/huggingface/pre_tokenizers.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tokenizer/encodings.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/metaspace_options.h"
#include "tokenizer/huggingface/pattern.h"
#include "tokenizer/huggingface/unicode_text.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// Replaces each piece by the pieces `cut` makes of it.
template <typename Cut>
void CutEach(std::vector<Piece>* pieces, Cut cut) {
  std::vector<Piece> out;
  for (const Piece& piece : *pieces) {
    for (Piece& part : cut(piece)) out.push_back(std::move(part));
  }
  *pieces = std::move(out);
}

class Split final : public PreTokenizer {
 public:
  Split(Pattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
  void Apply(std::vector<Piece>* pieces) const override {
    CutEach(pieces, [&](const Piece& piece) {
      return Slices(piece, SplitBy(pattern_.Find(piece.text), behavior_, invert_));
    });
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// The library's ByteLevel prepends the space as its prepend does (aligned with the first
// character), then cuts, then spells each byte as a character aligned with the
// character the byte is of.
class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, std::unique_ptr<Pattern> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void Apply(std::vector<Piece>* pieces) const override {
    CutEach(pieces, [&](const Piece& piece) {
      Piece spaced = piece;
      if (add_prefix_space_ && !spaced.text.empty() && spaced.text[0] != ' ') {
        spaced.text = " " + spaced.text;
        if (spaced.lead > 0) ++spaced.lead;
      }
      std::vector<Piece> cut =
          regex_ != nullptr
              ? Slices(spaced, SplitBy(regex_->Find(spaced.text), SplitBehavior::kIsolated,
                                       /*invert=*/false))
              : std::vector<Piece>{spaced};
      for (Piece& part : cut) {
        part.lead = LeadAfterRespelling(part, ByteLevelSpelling);
        part.text = ByteLevelSpelling(part.text);
      }
      return cut;
    });
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Pattern> regex_;  // GPT-2's pre-split, with use_regex
};

// The library's Metaspace replaces each space (its replacement aligned with the space),
// prepends as its prepend does, then cuts. "first" asks the piece's offset in the input.
class Metaspace final : public PreTokenizer {
 public:
  using Prepend = MetaspaceOptions::Prepend;
  Metaspace(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void Apply(std::vector<Piece>* pieces) const override {
    const Pattern space = Pattern::Literal(" ");
    const auto respell = [&](absl::string_view text) { return space.Replace(text, replacement_); };
    CutEach(pieces, [&](const Piece& piece) {
      Piece spelt{respell(piece.text), LeadAfterRespelling(piece, respell)};
      const bool starts = spelt.text.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && !spelt.text.empty() &&
          (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.BeginsInput()))) {
        spelt.text = replacement_ + spelt.text;
        if (spelt.lead > 0) spelt.lead += replacement_.size();
      }
      if (!split_) return std::vector<Piece>{spelt};
      return Slices(spelt, SplitBy(Pattern::Literal(replacement_).Find(spelt.text),
                                   SplitBehavior::kMergedWithNext, /*invert=*/false));
    });
  }

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individually) : individually_(individually) {}
  void Apply(std::vector<Piece>* pieces) const override {
    CutEach(pieces, [&](const Piece& piece) {
      return Slices(piece,
                    SplitBy(FindCharacters(piece.text, IsNumeric),
                            individually_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                            /*invert=*/false));
    });
  }

 private:
  bool individually_;
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void Apply(std::vector<Piece>* pieces) const override {
    for (const auto& step : steps_) step->Apply(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> ByteLevelFromJson(const nlohmann::json& json,
                                                                const std::string& path) {
  HF_ASSIGN_OR_RETURN(const bool prefix, BoolField(json, "add_prefix_space", path, true));
  HF_ASSIGN_OR_RETURN(const bool use_regex, BoolField(json, "use_regex", path, true));
  HF_ASSIGN_OR_RETURN(const bool trim_offsets, BoolField(json, "trim_offsets", path, true));
  (void)trim_offsets;  // offsets only, which ids do not carry
  std::unique_ptr<Pattern> regex;
  if (use_regex) {
    HF_ASSIGN_OR_RETURN(Pattern gpt2,
                        Pattern::FromJson({{"Regex", FindEncoding("gpt2")->pattern}}, path));
    regex = std::make_unique<Pattern>(std::move(gpt2));
  }
  return std::unique_ptr<PreTokenizer>(new ByteLevel(prefix, std::move(regex)));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MetaspaceFromJson(const nlohmann::json& json,
                                                                const std::string& path) {
  HF_ASSIGN_OR_RETURN(MetaspaceOptions options, ReadMetaspaceOptions(json, path));
  HF_ASSIGN_OR_RETURN(const bool split, BoolField(json, "split", path, true));
  return std::unique_ptr<PreTokenizer>(
      new Metaspace(std::move(options.replacement), options.prepend, split));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> SplitFromJson(const nlohmann::json& json,
                                                            const std::string& path) {
  const nlohmann::json* pattern_json = Field(json, "pattern");
  if (pattern_json == nullptr) return JsonError(path + ".pattern", "is missing");
  HF_ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromJson(*pattern_json, path + ".pattern"));
  const nlohmann::json* behavior_json = Field(json, "behavior");
  if (behavior_json == nullptr) return JsonError(path + ".behavior", "is missing");
  HF_ASSIGN_OR_RETURN(const SplitBehavior behavior,
                      SplitBehaviorFromJson(*behavior_json, path + ".behavior"));
  HF_ASSIGN_OR_RETURN(const bool invert, BoolField(json, "invert", path, false));
  return std::unique_ptr<PreTokenizer>(new Split(std::move(pattern), behavior, invert));
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> SequenceFromJson(const nlohmann::json& json,
                                                               const std::string& path) {
  const nlohmann::json* items = Field(json, "pretokenizers");
  if (items == nullptr || !items->is_array()) {
    return JsonError(path + ".pretokenizers", "is not an array");
  }
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (size_t i = 0; i < items->size(); ++i) {
    HF_ASSIGN_OR_RETURN(auto step, PreTokenizerFromJson(
                                       (*items)[i], absl::StrCat(path, ".pretokenizers[", i, "]")));
    if (step != nullptr) steps.push_back(std::move(step));
  }
  return std::unique_ptr<PreTokenizer>(new Sequence(std::move(steps)));
}

}  // namespace

std::string ByteLevelSpelling(absl::string_view bytes) {
  std::string spelt;
  for (const char byte : bytes) spelt += Gpt2CharacterOfByte(static_cast<unsigned char>(byte));
  return spelt;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& json,
                                                                   const std::string& path) {
  if (json.is_null()) return std::unique_ptr<PreTokenizer>();
  HF_ASSIGN_OR_RETURN(const std::string type, TypeOf(json, path));
  if (type == "ByteLevel") return ByteLevelFromJson(json, path);
  if (type == "Split") return SplitFromJson(json, path);
  if (type == "Metaspace") return MetaspaceFromJson(json, path);
  if (type == "Sequence") return SequenceFromJson(json, path);
  if (type == "Digits") {
    HF_ASSIGN_OR_RETURN(const bool individually, BoolField(json, "individual_digits", path, false));
    return std::unique_ptr<PreTokenizer>(new Digits(individually));
  }
  return JsonError(path, absl::StrCat("a pre_tokenizer of type \"", ShownValue(type),
                                      "\" is not supported (ByteLevel, Split, Metaspace, Digits "
                                      "and Sequence are)"));
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
