#include "tokenizer/huggingface/decoders.h"

#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/metaspace_options.h"
#include "tokenizer/huggingface/pattern.h"
#include "tokenizer/huggingface/unicode_text.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

constexpr char kReplacementCharacter[] = "\xEF\xBF\xBD";

// GPT-2's characters back to their bytes; nullopt for a token with any other character.
std::optional<std::string> ByteLevelBytes(absl::string_view token) {
  static const auto* byte_of = [] {
    auto* table = new absl::flat_hash_map<char32_t, char>;
    for (int byte = 0; byte < 256; ++byte) {
      ForEachCharacter(
          Gpt2CharacterOfByte(static_cast<unsigned char>(byte)),
          [&](char32_t c, absl::string_view) { (*table)[c] = static_cast<char>(byte); });
    }
    return table;
  }();
  std::string bytes;
  bool all = true;
  ForEachCharacter(token, [&](char32_t c, absl::string_view) {
    const auto it = byte_of->find(c);
    if (it == byte_of->end()) {
      all = false;
    } else {
      bytes += it->second;
    }
  });
  if (!all) return std::nullopt;
  return bytes;
}

class ByteLevel final : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const std::optional<std::string> decoded = ByteLevelBytes(token);
      bytes += decoded.has_value() ? *decoded : token;
    }
    return {ValidUtf8(bytes)};
  }
};

class ByteFallback final : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;  // consecutive byte tokens
    const auto flush = [&] {
      if (pending.empty()) return;
      if (ValidUtf8(pending) == pending) {
        out.push_back(pending);
      } else {
        for (size_t i = 0; i < pending.size(); ++i) out.push_back(kReplacementCharacter);
      }
      pending.clear();
    };
    for (std::string& token : tokens) {
      uint32_t byte = 0;
      if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' &&
          absl::SimpleHexAtoi(token.substr(3, 2), &byte)) {
        pending += static_cast<char>(byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    return out;
  }
};

class Fuse final : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    return {absl::StrJoin(tokens, "")};
  }
};

class Replace final : public Decoder {
 public:
  Replace(Pattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) token = pattern_.Replace(token, content_);
    return tokens;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class Strip final : public Decoder {
 public:
  Strip(std::string content, int start, int stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& token : tokens) {
      for (int i = 0; i < start_ && token.compare(0, content_.size(), content_) == 0; ++i) {
        token.erase(0, content_.size());
      }
      for (int i = 0; i < stop_ && token.size() >= content_.size() &&
                      token.compare(token.size() - content_.size(), content_.size(), content_) == 0;
           ++i) {
        token.erase(token.size() - content_.size());
      }
    }
    return tokens;
  }

 private:
  std::string content_;
  int start_, stop_;
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool prepended)
      : replacement_(std::move(replacement)), prepended_(prepended) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      // The replacement the encoder prepended is no space of the text.
      tokens[i] =
          Pattern::Literal(replacement_).Replace(tokens[i], i == 0 && prepended_ ? "" : " ");
    }
    return tokens;
  }

 private:
  std::string replacement_;
  bool prepended_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (const auto& step : steps_) tokens = step->DecodeChain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

absl::StatusOr<std::unique_ptr<Decoder>> StripFromJson(const nlohmann::json& json,
                                                       const std::string& path) {
  // The library's content is one character (an empty one would be stripped forever).
  HF_ASSIGN_OR_RETURN(std::string content, OneCharacterField(json, "content", path, std::nullopt));
  int counts[2] = {0, 0};
  const char* keys[2] = {"start", "stop"};
  for (int k = 0; k < 2; ++k) {
    if (const nlohmann::json* field = Field(json, keys[k]); field != nullptr) {
      HF_ASSIGN_OR_RETURN(counts[k], CountValue(*field, absl::StrCat(path, ".", keys[k])));
    }
  }
  return std::unique_ptr<Decoder>(new Strip(std::move(content), counts[0], counts[1]));
}

absl::StatusOr<std::unique_ptr<Decoder>> SequenceFromJson(const nlohmann::json& json,
                                                          const std::string& path) {
  const nlohmann::json* items = Field(json, "decoders");
  if (items == nullptr || !items->is_array()) {
    return JsonError(path + ".decoders", "is not an array");
  }
  std::vector<std::unique_ptr<Decoder>> steps;
  for (size_t i = 0; i < items->size(); ++i) {
    HF_ASSIGN_OR_RETURN(auto step,
                        DecoderFromJson((*items)[i], absl::StrCat(path, ".decoders[", i, "]")));
    if (step != nullptr) steps.push_back(std::move(step));
  }
  return std::unique_ptr<Decoder>(new Sequence(std::move(steps)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const nlohmann::json& json,
                                                         const std::string& path) {
  if (json.is_null()) return std::unique_ptr<Decoder>();
  HF_ASSIGN_OR_RETURN(const std::string type, TypeOf(json, path));
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevel());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallback());
  if (type == "Fuse") return std::unique_ptr<Decoder>(new Fuse());
  if (type == "Strip") return StripFromJson(json, path);
  if (type == "Sequence") return SequenceFromJson(json, path);
  if (type == "Replace") {
    const nlohmann::json* pattern_json = Field(json, "pattern");
    if (pattern_json == nullptr) return JsonError(path + ".pattern", "is missing");
    HF_ASSIGN_OR_RETURN(Pattern pattern, Pattern::FromJson(*pattern_json, path + ".pattern"));
    HF_ASSIGN_OR_RETURN(std::string content, StringField(json, "content", path, std::nullopt));
    return std::unique_ptr<Decoder>(new Replace(std::move(pattern), std::move(content)));
  }
  if (type == "Metaspace") {
    HF_ASSIGN_OR_RETURN(MetaspaceOptions options, ReadMetaspaceOptions(json, path));
    return std::unique_ptr<Decoder>(new Metaspace(
        std::move(options.replacement), options.prepend != MetaspaceOptions::Prepend::kNever));
  }
  return JsonError(path, absl::StrCat("a decoder of type \"", ShownValue(type),
                                      "\" is not supported (ByteLevel, Metaspace, ByteFallback, "
                                      "Fuse, Strip, Replace and Sequence are)"));
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
