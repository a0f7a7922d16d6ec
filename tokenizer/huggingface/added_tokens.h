#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_ADDED_TOKENS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_ADDED_TOKENS_H_

// tokenizer.json's "added_tokens": tokens matched in the text before the model sees it, as
// the library's AddedVocabulary does. Those with `normalized` false are matched in the raw
// text, the others in each stretch between them once normalised, in their own normalised
// form (with Lowercase, "Hello" matches "HELLO"; with Llama 2's Prepend, "<x>" is matched
// as "▁<x>"); at each place the longest token that starts there is taken, the leftmost
// first, and the search goes on where it ended. `single_word`: only where no word
// character (Rust's regex `\w`: IsRegexWordCharacter) touches the match, the search going
// on past a match refused; `lstrip` / `rstrip`: the whitespace before / after the match
// goes with it (a token in the whitespace an rstrip took is still found there, as the
// library finds it).
//
// Thread-safety: const after construction.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/bpe_model.h"
#include "tokenizer/huggingface/normalizers.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  std::string matched;  // what is matched: the content, normalised where `normalized`
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

class AddedTokens {
 public:
  // The tokens of `json` (an array, at `path`); INVALID_ARGUMENT naming the entry.
  // `normalizer` (may be null: none) gives the normalised tokens' matched form. Each
  // token's id is the library's (AddedVocabulary::add_tokens), whatever its entry says:
  // the id of the same content earlier in the list, else of the content in `model`'s
  // vocabulary, else the next one from the vocabulary's token count; a content listed
  // twice keeps its id and takes the later entry's flags.
  static absl::StatusOr<AddedTokens> FromJson(const nlohmann::json& json, const std::string& path,
                                              const Normalizer* normalizer, const BpeModel& model);

  // Calls `token(id)` for each match and `text(stretch)` for the text between, in order,
  // matching the tokens whose `normalized` is `normalized`.
  void Split(absl::string_view text, bool normalized, absl::FunctionRef<void(int32_t)> token,
             absl::FunctionRef<void(absl::string_view)> stretch) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The token with `id`, or nullptr.
  const AddedToken* ById(int32_t id) const;
  std::optional<int32_t> IdOf(absl::string_view content) const;

 private:
  struct Node {
    absl::flat_hash_map<unsigned char, int32_t> next;
    int32_t token = -1;  // the index in tokens_ of the token ending here
  };
  using Trie = std::vector<Node>;
  // Adds token `index` to `trie` under `key` (a key given twice: the later stands).
  static void Insert(Trie* trie, absl::string_view key, int32_t index);
  // The longest token of the kind asked for that starts at `at`: its index, and its end.
  std::optional<std::pair<int32_t, size_t>> LongestAt(absl::string_view text, size_t at,
                                                      bool normalized) const;
  bool Fits(const AddedToken& token, absl::string_view text, size_t start, size_t end) const;

  std::vector<AddedToken> tokens_;
  Trie raw_ = Trie(1);         // the tokens matched in the raw text, by content
  Trie normalized_ = Trie(1);  // the others, by their normalised content
  absl::flat_hash_map<std::string, int32_t> id_of_content_;
  absl::flat_hash_map<int32_t, int32_t> index_of_id_;
};

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_ADDED_TOKENS_H_
