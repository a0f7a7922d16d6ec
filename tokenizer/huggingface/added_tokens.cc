#include "tokenizer/huggingface/added_tokens.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/huggingface/unicode_text.h"
#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

// The character that ends at `end` (0 at the text's start) and the one at `start`.
char32_t CharacterBefore(absl::string_view text, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  char32_t found = 0;
  ForEachCharacter(text.substr(start, end - start),
                   [&](char32_t c, absl::string_view) { found = c; });
  return found;
}

char32_t CharacterAt(absl::string_view text, size_t start) {
  char32_t found = 0;
  const size_t length = std::max<size_t>(1, Utf8CharLength(text.substr(start)));
  ForEachCharacter(text.substr(start, length), [&](char32_t c, absl::string_view) { found = c; });
  return found;
}

bool IsWordCharacter(char32_t c) { return IsRegexWordCharacter(c); }

}  // namespace

namespace {

// One entry of "added_tokens", its id as the file gives it.
absl::StatusOr<AddedToken> ParseAddedToken(const nlohmann::json& entry, const std::string& where) {
  AddedToken token;
  const nlohmann::json* id = Field(entry, "id");
  if (id == nullptr) return JsonError(where + ".id", "is missing");
  HF_ASSIGN_OR_RETURN(token.id, IdValue(*id, where + ".id"));
  HF_ASSIGN_OR_RETURN(token.content, StringField(entry, "content", where, std::nullopt));
  // Every flag is required: the library's AddedToken has no defaults, and refuses the
  // file without one.
  HF_ASSIGN_OR_RETURN(token.single_word, RequiredBoolField(entry, "single_word", where));
  HF_ASSIGN_OR_RETURN(token.lstrip, RequiredBoolField(entry, "lstrip", where));
  HF_ASSIGN_OR_RETURN(token.rstrip, RequiredBoolField(entry, "rstrip", where));
  HF_ASSIGN_OR_RETURN(token.normalized, RequiredBoolField(entry, "normalized", where));
  HF_ASSIGN_OR_RETURN(token.special, RequiredBoolField(entry, "special", where));
  return token;
}

}  // namespace

absl::StatusOr<AddedTokens> AddedTokens::FromJson(const nlohmann::json& json,
                                                  const std::string& path,
                                                  const Normalizer* normalizer,
                                                  const BpeModel& model) {
  AddedTokens added;
  if (json.is_null()) return added;
  if (!json.is_array()) return JsonError(path, "is not an array of tokens");
  std::map<int32_t, AddedToken> by_id;  // the later entry of an id stands
  int64_t next_id = model.token_count();
  for (size_t i = 0; i < json.size(); ++i) {
    HF_ASSIGN_OR_RETURN(AddedToken token,
                        ParseAddedToken(json[i], absl::StrCat(path, "[", i, "]")));
    if (token.content.empty()) continue;  // the library skips it: no token, no id
    if (const auto earlier = added.id_of_content_.find(token.content);
        earlier != added.id_of_content_.end()) {
      token.id = earlier->second;
    } else if (const std::optional<int32_t> in_model = model.Id(token.content)) {
      token.id = *in_model;
    } else {
      if (next_id > kMaxTokenId) {
        return JsonError(absl::StrCat(path, "[", i, "]"),
                         absl::StrCat("would take id ", next_id, ", past ", kMaxTokenId));
      }
      token.id = static_cast<int32_t>(next_id++);
    }
    token.matched = token.normalized && normalizer != nullptr
                        ? normalizer->Normalized(token.content)
                        : token.content;
    added.id_of_content_[token.content] = token.id;
    by_id[token.id] = std::move(token);
  }
  for (auto& [id, token] : by_id) {
    const int32_t index = static_cast<int32_t>(added.tokens_.size());
    // A token whose normalised form is empty matches nothing (there is nothing to find).
    if (!token.matched.empty()) {
      Insert(token.normalized ? &added.normalized_ : &added.raw_, token.matched, index);
    }
    added.index_of_id_[id] = index;
    added.tokens_.push_back(std::move(token));
  }
  return added;
}

void AddedTokens::Insert(Trie* trie, absl::string_view key, int32_t index) {
  int32_t node = 0;
  for (const char byte : key) {
    const auto next = (*trie)[node].next.find(static_cast<unsigned char>(byte));
    if (next != (*trie)[node].next.end()) {
      node = next->second;
      continue;
    }
    trie->emplace_back();
    const int32_t created = static_cast<int32_t>(trie->size()) - 1;
    (*trie)[node].next[static_cast<unsigned char>(byte)] = created;
    node = created;
  }
  (*trie)[node].token = index;
}

const AddedToken* AddedTokens::ById(int32_t id) const {
  const auto it = index_of_id_.find(id);
  return it == index_of_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedTokens::IdOf(absl::string_view content) const {
  const auto it = id_of_content_.find(content);
  if (it == id_of_content_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::pair<int32_t, size_t>> AddedTokens::LongestAt(absl::string_view text, size_t at,
                                                                 bool normalized) const {
  const Trie& trie = normalized ? normalized_ : raw_;
  std::optional<std::pair<int32_t, size_t>> longest;
  int32_t node = 0;
  for (size_t i = at; i < text.size(); ++i) {
    const auto next = trie[node].next.find(static_cast<unsigned char>(text[i]));
    if (next == trie[node].next.end()) break;
    node = next->second;
    if (trie[node].token >= 0) longest = {trie[node].token, i + 1};
  }
  return longest;
}

bool AddedTokens::Fits(const AddedToken& token, absl::string_view text, size_t start,
                       size_t end) const {
  if (!token.single_word) return true;
  const bool word_before = start > 0 && IsWordCharacter(CharacterBefore(text, start));
  const bool word_after = end < text.size() && IsWordCharacter(CharacterAt(text, end));
  return !word_before && !word_after;
}

void AddedTokens::Split(absl::string_view text, bool normalized,
                        absl::FunctionRef<void(int32_t)> token,
                        absl::FunctionRef<void(absl::string_view)> stretch) const {
  size_t emitted = 0;  // text before this is given out
  size_t position = 0;
  // As the library's matcher (leftmost-longest, not overlapping): the search goes on
  // where a match ended, before any whitespace an rstrip took with it (so a token there
  // is still found), and past a single_word match refused.
  while (position < text.size()) {
    const auto found = LongestAt(text, position, normalized);
    if (!found.has_value()) {
      ++position;
      continue;
    }
    if (!Fits(tokens_[found->first], text, position, found->second)) {
      position = found->second;
      continue;
    }
    const AddedToken& added = tokens_[found->first];
    size_t start = position, end = found->second;
    if (added.lstrip) {
      while (start > emitted && IsWhitespace(CharacterBefore(text, start))) {
        start -= Utf8(CharacterBefore(text, start)).size();
      }
    }
    if (added.rstrip) {
      while (end < text.size() && IsWhitespace(CharacterAt(text, end))) {
        end += std::max<size_t>(1, Utf8CharLength(text.substr(end)));
      }
    }
    if (start > emitted) stretch(text.substr(emitted, start - emitted));
    token(added.id);
    emitted = end;
    position = found->second;
  }
  if (emitted < text.size()) stretch(text.substr(emitted));
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
