#include "tokenizer/vocabulary_files.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
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

absl::StatusOr<std::vector<BpeToken>> ReadTiktokenFile(const std::string& path) {
  auto text = ReadFileBytes(path);
  if (!text.ok()) return text.status();
  std::vector<BpeToken> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    ++line_number;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
    BpeToken token;
    if (fields.size() != 2 || !absl::Base64Unescape(fields[0], &token.bytes) ||
        token.bytes.empty() || !absl::SimpleAtoi(fields[1], &token.id) || token.id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": not a tiktoken rank line (\"BASE64 RANK\")"));
    }
    token.priority = token.id;
    tokens.push_back(std::move(token));
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": no ranks"));
  return tokens;
}

absl::StatusOr<Gpt2Vocabulary> ReadGpt2Files(const std::string& encoder_json_path,
                                             const std::string& vocab_bpe_path) {
  auto encoder_text = ReadFileBytes(encoder_json_path);
  if (!encoder_text.ok()) return encoder_text.status();
  auto merges_text = ReadFileBytes(vocab_bpe_path);
  if (!merges_text.ok()) return merges_text.status();
  nlohmann::json encoder =
      nlohmann::json::parse(*encoder_text, nullptr, /*allow_exceptions=*/false);
  if (!encoder.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(encoder_json_path, ": not a JSON object"));
  }
  // A merge's result gets the merge's line as its priority; single bytes need none.
  absl::flat_hash_map<std::string, int32_t> priority_of;
  int32_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(*merges_text, '\n', absl::SkipEmpty())) {
    if (line_number++ == 0 && absl::StartsWith(line, "#version")) continue;
    std::vector<absl::string_view> pair = absl::StrSplit(line, ' ');
    if (pair.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(vocab_bpe_path, ":", line_number, ": not a merge (\"LEFT RIGHT\")"));
    }
    priority_of.emplace(absl::StrCat(pair[0], pair[1]), line_number);
  }
  Gpt2Spelling spelling;
  Gpt2Vocabulary vocabulary;
  for (const auto& [spelt, id] : encoder.items()) {
    if (!id.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat(encoder_json_path, ": the id of \"", spelt, "\" is not an integer"));
    }
    auto priority = priority_of.find(spelt);
    auto bytes = spelling.Bytes(spelt);
    if (bytes.ok() && (bytes->size() == 1 || priority != priority_of.end())) {
      vocabulary.tokens.push_back(
          {*bytes, id.get<int32_t>(), priority == priority_of.end() ? 0 : priority->second});
    } else {
      vocabulary.specials.push_back({spelt, id.get<int32_t>()});
    }
  }
  return vocabulary;
}

}  // namespace tokenizer
}  // namespace shardwise
