#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_BPE_MODEL_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_BPE_MODEL_H_

// Hugging Face's BPE model (tokenizer.json's "model": {"type": "BPE"}), as the `tokenizers`
// library runs it on each pre-tokenized piece:
//   - with `ignore_merges`, a piece that is a token of the vocabulary is that token;
//   - else each character (with `continuing_subword_prefix` after the first, and
//     `end_of_word_suffix` on the last) is its token; a character with none is its bytes'
//     "<0xAB>" tokens with `byte_fallback`, else `unk_token` (runs of them fused into one
//     with `fuse_unk`), else dropped;
//   - then merges, lowest rank first, the leftmost of equal ranks: a merge is a pair of
//     tokens (merges as "a b" strings or as ["a", "b"] pairs), its rank its line, its result
//     the token a + b.
// dropout (sampling) is refused: encoding is deterministic.
//
// Thread-safety: const methods may be called from several threads (a piece cache per
// thread).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/tokenizer_json.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

class BpeModel {
 public:
  // The model of `json` (tokenizer.json's "model", at `path` for errors) and `lists`, its
  // vocabulary and merges as tokenizer_json.h reads them.
  static absl::StatusOr<BpeModel> FromJson(const nlohmann::json& json, ModelLists lists,
                                           const std::string& path);

  // Appends the ids of `piece` to `ids`.
  void Encode(absl::string_view piece, std::vector<int32_t>* ids) const;

  // The token of `id`, or nullptr for an id the vocabulary lacks.
  const std::string* Token(int32_t id) const;
  std::optional<int32_t> Id(absl::string_view token) const;
  // One more than the largest id of the vocabulary.
  int32_t size() const { return static_cast<int32_t>(token_of_id_.size()); }
  // The number of tokens in the vocabulary (the library's get_vocab_size).
  int32_t token_count() const { return static_cast<int32_t>(vocab_.size()); }
  // Whether a word's tokens are marked (continuing_subword_prefix, end_of_word_suffix).
  bool has_affixes() const {
    return !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty();
  }
  // Whether a run of unknown characters may become one unknown token (fuse_unk): never
  // where byte_fallback finds every byte's "<0xAB>" token, since no character is unknown
  // then (Gemma 3's file sets both).
  bool fuses_unknown() const {
    return fuse_unk_ && unk_id_.has_value() && !falls_back_on_every_byte_;
  }
  // Whether a piece that is a token is that token, unmerged (ignore_merges).
  bool ignores_merges() const { return ignore_merges_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t PairKey(int32_t left, int32_t right) {
    return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
  }
  absl::Status ReadVocab(VocabEntries&& vocab, const std::string& path);
  absl::Status ReadMerges(const std::vector<MergeEntry>& merges, const std::string& path);
  // The piece's characters as tokens, before any merge.
  std::vector<int32_t> Characters(absl::string_view piece) const;
  void MergeAll(std::vector<int32_t>* symbols) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> token_of_id_;
  std::vector<bool> has_id_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::string continuing_subword_prefix_, end_of_word_suffix_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool falls_back_on_every_byte_ = false;  // byte_fallback, and all 256 byte tokens
  bool ignore_merges_ = false;
  uint64_t key_ = NewKey();  // the model's in the per-thread piece caches

  static uint64_t NewKey();
};

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_BPE_MODEL_H_
