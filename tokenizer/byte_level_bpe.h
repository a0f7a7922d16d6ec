#ifndef SHARDWISE_TOKENIZER_BYTE_LEVEL_BPE_H_
#define SHARDWISE_TOKENIZER_BYTE_LEVEL_BPE_H_

// Byte-level BPE as GPT-2 and tiktoken define it: the encoding's pattern pre-splits the
// text, and each piece's bytes are merged by the vocabulary's priorities.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "tokenizer/byte_pair_encoder.h"
#include "tokenizer/encodings.h"
#include "tokenizer/pre_split.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {

class ByteLevelBpe : public Tokenizer {
 public:
  // A tiktoken rank file with the encoding `encoding_name` (FindEncoding). INVALID_ARGUMENT
  // for an unknown name or a file whose size does not fit the encoding.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> FromTiktoken(
      const std::string& path, const std::string& encoding_name);

  // The same from the file's ranks (ParseTiktoken); `name` names the file in errors.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> FromTiktokenRanks(
      const std::vector<BpeToken>& tokens, const std::string& name,
      const std::string& encoding_name);

  // GPT-2's encoder.json and vocab.bpe, with GPT-2's pattern. INVALID_ARGUMENT also for a
  // special token (an entry of encoder.json that is no token) whose id another token has.
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> FromGpt2Files(
      const std::string& encoder_json_path, const std::string& vocab_bpe_path);
  static absl::StatusOr<std::unique_ptr<ByteLevelBpe>> FromGpt2Vocabulary(
      const Gpt2Vocabulary& vocabulary, const std::string& name);

  void Encode(std::string_view text, bool document_start, std::vector<int32_t>* ids) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::vector<int32_t> DocumentPrefix() const override { return encoding_.before_document; }
  std::vector<int32_t> DocumentSuffix() const override { return encoding_.after_document; }
  std::optional<std::string> SpecialTokenText(int32_t id) const override;

 private:
  ByteLevelBpe(Encoding encoding, BytePairEncoder encoder, PreSplitter splitter);

  Encoding encoding_;
  BytePairEncoder encoder_;
  PreSplitter splitter_;
  absl::flat_hash_map<int32_t, std::string> special_text_;
  int64_t vocab_size_ = 0;
  uint64_t cache_key_ = 0;  // this encoder's, in each thread's piece cache
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_BYTE_LEVEL_BPE_H_
