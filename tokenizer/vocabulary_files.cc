#include "tokenizer/vocabulary_files.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/printable_text.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/manifest.h"

namespace shardwise {
namespace tokenizer {
namespace {

void AppendUtf8(uint32_t code, std::string* out) {
  if (code < 0x80) {
    out->push_back(static_cast<char>(code));
  } else if (code < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code >> 6)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (code >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code & 0x3F)));
  }
}

// GPT-2's spelling of bytes -> the bytes; INVALID_ARGUMENT for a character outside it.
class Gpt2Spelling {
 public:
  Gpt2Spelling() {
    for (int byte = 0; byte < 256; ++byte) byte_of_.emplace(Gpt2CharacterOfByte(byte), byte);
  }
  absl::StatusOr<std::string> Bytes(absl::string_view spelt) const {
    std::string bytes;
    while (!spelt.empty()) {
      // Every character of the table is one or two UTF-8 bytes.
      const size_t length = static_cast<unsigned char>(spelt[0]) < 0x80 ? 1 : 2;
      auto it = byte_of_.find(spelt.substr(0, length));
      if (it == byte_of_.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", absl::CHexEscape(spelt), "\" is not spelt in GPT-2's bytes"));
      }
      bytes.push_back(static_cast<char>(it->second));
      spelt.remove_prefix(length);
    }
    return bytes;
  }

 private:
  absl::flat_hash_map<std::string, int> byte_of_;
};

// An id as encoder.json gives it: an integer in 0..kMaxTokenId, else why not (the value
// as given: nlohmann keeps 4294967303 as an unsigned, which a narrowing read would wrap).
absl::StatusOr<int32_t> TokenIdOf(const nlohmann::json& id) {
  if (id.is_number_unsigned() && id.get<uint64_t>() <= static_cast<uint64_t>(kMaxTokenId)) {
    return static_cast<int32_t>(id.get<uint64_t>());
  }
  if (id.is_number_integer() && !id.is_number_unsigned() && id.get<int64_t>() >= 0 &&
      id.get<int64_t>() <= kMaxTokenId) {
    return static_cast<int32_t>(id.get<int64_t>());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("is ", ShownValue(id.dump()), ", not an integer id in 0..", kMaxTokenId));
}

}  // namespace

std::string Gpt2CharacterOfByte(unsigned char byte) {
  const auto stands_for_itself = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  uint32_t code = byte;
  if (!stands_for_itself(byte)) {
    code = 256;
    for (int b = 0; b < byte; ++b) code += !stands_for_itself(b);
  }
  std::string utf8;
  AppendUtf8(code, &utf8);
  return utf8;
}

absl::StatusOr<std::vector<BpeToken>> ParseTiktoken(const std::string& name,
                                                    absl::string_view text) {
  std::vector<BpeToken> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_number;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    BpeToken token;
    if (fields.size() != 2 || !absl::Base64Unescape(fields[0], &token.bytes) ||
        token.bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ":", line_number, ": not a tiktoken rank line (\"BASE64 RANK\")"));
    }
    int64_t rank = -1;
    if (!absl::SimpleAtoi(fields[1], &rank) || rank < 0 || rank > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat(name, ":", line_number, ": the rank \"",
                                                     ShownValue(fields[1]),
                                                     "\" is not an id in 0..", kMaxTokenId));
    }
    token.id = static_cast<int32_t>(rank);
    token.priority = token.id;
    tokens.push_back(std::move(token));
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no ranks"));
  return tokens;
}

absl::StatusOr<std::vector<BpeToken>> ReadTiktokenFile(const std::string& path) {
  auto text = ReadFileBytes(path);
  if (!text.ok()) return text.status();
  return ParseTiktoken(path, *text);
}

absl::StatusOr<Gpt2Vocabulary> ParseGpt2Files(const std::string& encoder_json_name,
                                              absl::string_view encoder_json,
                                              const std::string& vocab_bpe_name,
                                              absl::string_view vocab_bpe) {
  // Nested deep, a file parses into gigabytes: refused unparsed, as a tokenizer.json is.
  if (absl::Status nesting = hf::CheckJsonNesting(encoder_json, encoder_json_name); !nesting.ok()) {
    return nesting;
  }
  nlohmann::json encoder = nlohmann::json::parse(encoder_json, nullptr, /*allow_exceptions=*/false);
  if (!encoder.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(encoder_json_name, ": not a JSON object"));
  }
  // A merge's result gets the merge's line as its priority; single bytes need none.
  absl::flat_hash_map<std::string, int32_t> priority_of;
  int32_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(vocab_bpe, '\n', absl::SkipEmpty())) {
    if (line_number++ == 0 && absl::StartsWith(line, "#version")) continue;
    std::vector<absl::string_view> pair = absl::StrSplit(line, ' ');
    if (pair.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab_bpe_name, ":", line_number, ": not a merge (\"LEFT RIGHT\")"));
    }
    priority_of.emplace(absl::StrCat(pair[0], pair[1]), line_number);
  }
  Gpt2Spelling spelling;
  Gpt2Vocabulary vocabulary;
  for (const auto& [spelt, id_json] : encoder.items()) {
    auto id = TokenIdOf(id_json);
    if (!id.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          encoder_json_name, ": the id of \"", ShownValue(spelt), "\" ", id.status().message()));
    }
    auto priority = priority_of.find(spelt);
    auto bytes = spelling.Bytes(spelt);
    if (bytes.ok() && (bytes->size() == 1 || priority != priority_of.end())) {
      vocabulary.tokens.push_back(
          {*bytes, *id, priority == priority_of.end() ? 0 : priority->second});
    } else {
      vocabulary.specials.push_back({spelt, *id});
    }
  }
  return vocabulary;
}

absl::StatusOr<Gpt2Vocabulary> ReadGpt2Files(const std::string& encoder_json_path,
                                             const std::string& vocab_bpe_path) {
  auto encoder_text = ReadFileBytes(encoder_json_path);
  if (!encoder_text.ok()) return encoder_text.status();
  auto merges_text = ReadFileBytes(vocab_bpe_path);
  if (!merges_text.ok()) return merges_text.status();
  return ParseGpt2Files(encoder_json_path, *encoder_text, vocab_bpe_path, *merges_text);
}

}  // namespace tokenizer
}  // namespace shardwise
