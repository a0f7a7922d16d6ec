#ifndef SHARDWISE_CONTRACTS_BYTE_TOKENS_H_
#define SHARDWISE_CONTRACTS_BYTE_TOKENS_H_

// Byte-level tokens (vocabulary 256: each byte of the text is one id), for
// `shardwise tokenize` and `shardwise sample`. Token files are raw little-endian uint16,
// nanoGPT's train.bin / val.bin (data.tokens, format UINT16).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise {

inline constexpr int64_t kByteVocabulary = 256;

struct TokenizedText {
  std::string train_path, val_path;
  int64_t train_tokens = 0, val_tokens = 0;
};

// Concatenates `inputs` and writes the first (1 - val_fraction) of its bytes to
// DIR/train.bin and the rest to DIR/val.bin (each written whole, then renamed into
// place). INVALID_ARGUMENT for a fraction outside [0, 1) or an empty text, NOT_FOUND for
// an input that cannot be read.
absl::StatusOr<TokenizedText> TokenizeBytes(const std::vector<std::string>& inputs,
                                            const std::string& out_dir, double val_fraction);

// The ids of `text`'s bytes.
std::vector<int64_t> BytesToIds(const std::string& text);

// The text of `ids`: each id below 256 is that byte, but control characters other than
// newline and tab, which print as \xNN; other ids print as <id>.
std::string IdsToPrintable(const std::vector<int64_t>& ids);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_BYTE_TOKENS_H_
