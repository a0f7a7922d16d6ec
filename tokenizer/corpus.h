#ifndef SHARDWISE_TOKENIZER_CORPUS_H_
#define SHARDWISE_TOKENIZER_CORPUS_H_

// `shardwise tokenize`'s work: a corpus of text files (one document each) to a train and
// a val token file, streamed in chunks (corpus_chunker.h) that `threads` threads encode
// while the ids are written in order. Each document's ids are the tokenizer's
// DocumentPrefix, its text's, then its DocumentSuffix.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

struct CorpusProgress {
  int64_t bytes_done = 0, bytes_total = 0;
  int64_t tokens = 0;
  double seconds = 0;
};

struct CorpusOptions {
  double val_fraction = 0.1;  // in [0, 1)
  int threads = 2;
  size_t chunk_bytes = size_t{1} << 20;
  std::function<void(const CorpusProgress&)> on_progress;  // after each round of chunks
};

struct TokenizedCorpus {
  std::string train_path, val_path;  // DIR/train.bin and DIR/val.bin, or .safetensors
  int64_t train_tokens = 0, val_tokens = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

// Encoding threads at most: each holds a chunk of text and its ids.
inline constexpr int kMaxCorpusThreads = 1024;

// INVALID_ARGUMENT for a fraction outside [0, 1), threads outside 1..kMaxCorpusThreads or
// a corpus with no text, NOT_FOUND for an input that is not a readable file: what
// TokenizeCorpus would refuse before it reads any text, for a caller to learn before it
// writes anything else (the tokenizer beside the token files).
absl::Status CheckCorpus(const std::vector<std::string>& inputs, const CorpusOptions& options);

// CheckCorpus's refusals, DATA_LOSS if an id falls outside the vocabulary, and
// INVALID_ARGUMENT for a split that leaves the validation file empty: the token files are
// renamed into place only when all went well.
absl::StatusOr<TokenizedCorpus> TokenizeCorpus(const Tokenizer& tokenizer,
                                               const std::vector<std::string>& inputs,
                                               const std::string& out_dir,
                                               const CorpusOptions& options);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_CORPUS_H_
