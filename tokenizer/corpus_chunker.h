#ifndef SHARDWISE_TOKENIZER_CORPUS_CHUNKER_H_
#define SHARDWISE_TOKENIZER_CORPUS_CHUNKER_H_

// Reads a corpus (text files, one document each) as chunks of about `chunk_bytes`, each
// cut where Tokenizer::CanCutAt allows, so that chunks encode apart (and in parallel) to
// the ids of whole documents, and a corpus larger than memory streams. The train/val
// split falls at the first such cut at or after (1 - val_fraction) of the corpus's bytes.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise {
namespace tokenizer {

struct Chunk {
  std::string text;
  bool document_start = false, document_end = false;
  bool val = false;  // past the train/val split
};

class CorpusChunker {
 public:
  // A chunk with no place to cut grows to `max_chunk_bytes`, then is cut at a UTF-8
  // boundary (the only cut that may change ids: a megabytes-long line with no newline).
  // `cut_documents` false (a tokenizer whose ids a cut may change: KeepsIdsAtCuts): each
  // document is one chunk, up to max_chunk_bytes.
  CorpusChunker(std::vector<std::string> paths, int64_t split_offset, size_t chunk_bytes,
                bool cut_documents = true, size_t max_chunk_bytes = size_t{64} << 20);

  // The next chunk; false after the last. NOT_FOUND for a file that cannot be read.
  absl::StatusOr<bool> Next(Chunk* chunk);

  int64_t bytes_read() const { return offset_; }

 private:
  bool ReadBlock();  // appends to pending_; false at the end of the file
  size_t CutPosition(size_t from) const;

  std::vector<std::string> paths_;
  size_t next_path_ = 0;
  std::ifstream file_;
  bool in_document_ = false, document_started_ = false, file_done_ = false;
  std::string pending_;
  int64_t offset_ = 0;  // corpus bytes handed out so far
  const int64_t split_offset_;
  const size_t chunk_bytes_;
  const bool cut_documents_;
  const size_t max_chunk_bytes_;
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_CORPUS_CHUNKER_H_
