#ifndef SHARDWISE_TOKENIZER_BYTE_PAIR_ENCODER_H_
#define SHARDWISE_TOKENIZER_BYTE_PAIR_ENCODER_H_

// Byte-pair encoding of one pre-split piece: start from its bytes and merge, again and
// again, the adjacent pair whose concatenation has the lowest merge priority (the leftmost
// of equals) until no pair's concatenation is a token. That is tiktoken's rule; GPT-2's
// merges (vocab.bpe) follow it too, with a token's priority its merge's line. A heap of
// candidate pairs keeps a long piece O(n log n) (a megabyte of letters is one piece).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {

// The largest id a vocabulary file may give a token. Ids index tables as long as the
// largest of them, so an id of 2^31 - 1 would ask for gigabytes; the largest published
// vocabularies hold about 262,144 tokens (Gemma 3), far below this.
inline constexpr int32_t kMaxTokenId = (1 << 24) - 1;

struct BpeToken {
  std::string bytes;
  int32_t id = 0;
  int32_t priority = 0;  // lower merges first
};

class BytePairEncoder {
 public:
  // INVALID_ARGUMENT when a byte value has no token of its own, two tokens have the same
  // bytes or id, or an id is negative or over kMaxTokenId.
  static absl::StatusOr<BytePairEncoder> Create(const std::vector<BpeToken>& tokens);

  // Appends the ids of `piece` to `ids`.
  void Encode(absl::string_view piece, std::vector<int32_t>* ids) const;

  // The bytes of token `id`; nullptr for an id that is none of the tokens.
  const std::string* Bytes(int32_t id) const;

  // One more than the largest id.
  int32_t size() const { return static_cast<int32_t>(bytes_of_id_.size()); }

 private:
  struct Entry {
    int32_t id;
    int32_t priority;
  };
  void Merge(absl::string_view piece, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, Entry> tokens_;
  std::vector<std::string> bytes_of_id_;
  std::vector<bool> has_id_;
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_BYTE_PAIR_ENCODER_H_
