#ifndef SHARDWISE_TOKENIZER_VOCABULARY_FILES_H_
#define SHARDWISE_TOKENIZER_VOCABULARY_FILES_H_

// Byte-level BPE vocabularies as published: tiktoken rank files ("BASE64 RANK" per line:
// a token's bytes and its id, which is also its merge priority) and GPT-2's
// encoder.json (token text -> id, bytes spelt with GPT-2's byte-to-character table) with
// vocab.bpe (the merges, in priority order).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/byte_pair_encoder.h"
#include "tokenizer/encodings.h"

namespace shardwise {
namespace tokenizer {

// NOT_FOUND for a file that cannot be read; INVALID_ARGUMENT naming the path and line of
// one that is not of the format, or of a rank that is not an id in 0..kMaxTokenId.
absl::StatusOr<std::vector<BpeToken>> ReadTiktokenFile(const std::string& path);
// The same from the file's text; `name` names it in errors.
absl::StatusOr<std::vector<BpeToken>> ParseTiktoken(const std::string& name,
                                                    absl::string_view text);

struct Gpt2Vocabulary {
  std::vector<BpeToken> tokens;        // mergeable: single bytes and the merges' results
  std::vector<SpecialToken> specials;  // encoder.json's other entries (<|endoftext|>)
};
// INVALID_ARGUMENT naming the file, and the line or the entry, that is not of the format
// (an id that is not an integer in 0..kMaxTokenId among them).
absl::StatusOr<Gpt2Vocabulary> ReadGpt2Files(const std::string& encoder_json_path,
                                             const std::string& vocab_bpe_path);
absl::StatusOr<Gpt2Vocabulary> ParseGpt2Files(const std::string& encoder_json_name,
                                              absl::string_view encoder_json,
                                              const std::string& vocab_bpe_name,
                                              absl::string_view vocab_bpe);

// GPT-2's table: the character that stands for each byte in encoder.json and vocab.bpe
// (printable bytes stand for themselves, the others for U+0100 onwards), as UTF-8.
std::string Gpt2CharacterOfByte(unsigned char byte);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_VOCABULARY_FILES_H_
