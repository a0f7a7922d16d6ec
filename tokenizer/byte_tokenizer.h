#ifndef SHARDWISE_TOKENIZER_BYTE_TOKENIZER_H_
#define SHARDWISE_TOKENIZER_BYTE_TOKENIZER_H_

// Bytes as tokens (vocabulary 256): each byte of the text is its id. Documents are
// concatenated with nothing between them.

#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

inline constexpr int64_t kByteVocabulary = 256;

class ByteTokenizer : public Tokenizer {
 public:
  void Encode(std::string_view text, bool /*document_start*/,
              std::vector<int32_t>* ids) const override {
    for (unsigned char c : text) ids->push_back(c);
  }
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return kByteVocabulary; }
  std::vector<int32_t> DocumentPrefix() const override { return {}; }
  std::vector<int32_t> DocumentSuffix() const override { return {}; }
  std::optional<std::string> SpecialTokenText(int32_t /*id*/) const override {
    return std::nullopt;
  }
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_BYTE_TOKENIZER_H_
