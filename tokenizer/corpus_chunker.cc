#include "tokenizer/corpus_chunker.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

CorpusChunker::CorpusChunker(std::vector<std::string> paths, int64_t split_offset,
                             size_t chunk_bytes, bool cut_documents, size_t max_chunk_bytes)
    : paths_(std::move(paths)),
      split_offset_(split_offset),
      chunk_bytes_(std::max<size_t>(chunk_bytes, 1)),
      cut_documents_(cut_documents),
      max_chunk_bytes_(std::max(max_chunk_bytes, chunk_bytes_)) {}

bool CorpusChunker::ReadBlock() {
  const size_t old_size = pending_.size();
  pending_.resize(old_size + chunk_bytes_);
  file_.read(pending_.data() + old_size, static_cast<std::streamsize>(chunk_bytes_));
  pending_.resize(old_size + static_cast<size_t>(file_.gcount()));
  return file_.gcount() > 0;
}

// The first place at or after `from` where pending_ may be cut; npos for none.
size_t CorpusChunker::CutPosition(size_t from) const {
  if (!cut_documents_) return std::string::npos;
  for (size_t i = std::max<size_t>(from, 1); i < pending_.size(); ++i) {
    if (CanCutAt(pending_, i)) return i;
  }
  return std::string::npos;
}

absl::StatusOr<bool> CorpusChunker::Next(Chunk* chunk) {
  while (!in_document_) {
    if (next_path_ == paths_.size()) return false;
    file_ = std::ifstream(paths_[next_path_], std::ios::binary);
    if (!file_) return absl::NotFoundError(absl::StrCat(paths_[next_path_], ": cannot be read"));
    ++next_path_;
    pending_.clear();
    file_done_ = !ReadBlock();
    in_document_ = !pending_.empty();  // an empty file is no document
    document_started_ = false;
  }
  // Cut no earlier than chunk_bytes, or than the split when it falls inside the chunk.
  size_t from = chunk_bytes_;
  if (offset_ < split_offset_ && split_offset_ - offset_ < static_cast<int64_t>(from)) {
    from = static_cast<size_t>(split_offset_ - offset_);
  }
  size_t cut = std::string::npos;
  while (true) {
    if (pending_.size() > from) cut = CutPosition(from);
    if (cut != std::string::npos || file_done_) break;
    // No place to cut in max_chunk_bytes: the UTF-8 boundary at or before it, so that
    // what follows starts another max_chunk_bytes. Only once pending_ holds more (a block
    // more at most): a chunk of exactly the bound, all that was read, would not say
    // whether the document goes on, and ending it there dropped the rest of the file.
    if (pending_.size() > max_chunk_bytes_) {
      cut = max_chunk_bytes_;
      while (cut > 1 && (static_cast<unsigned char>(pending_[cut]) & 0xC0) == 0x80) --cut;
      break;
    }
    file_done_ = !ReadBlock();
  }
  chunk->val = offset_ >= split_offset_;
  chunk->document_start = !document_started_;
  document_started_ = true;
  if (cut == std::string::npos || cut >= pending_.size()) {
    chunk->text = std::move(pending_);
    pending_.clear();
    chunk->document_end = true;
    in_document_ = false;
  } else {
    chunk->text = pending_.substr(0, cut);
    pending_.erase(0, cut);
    chunk->document_end = false;
  }
  offset_ += static_cast<int64_t>(chunk->text.size());
  return true;
}

}  // namespace tokenizer
}  // namespace shardwise
