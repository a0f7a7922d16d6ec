#include "tokenizer/corpus.h"

#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tokenizer/corpus_chunker.h"
#include "tokenizer/token_file_writer.h"

namespace shardwise {
namespace tokenizer {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<int64_t> CorpusBytes(const std::vector<std::string>& inputs) {
  int64_t total = 0;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (!fs::is_regular_file(input, error)) {
      return absl::NotFoundError(absl::StrCat("'", input, "' is not a readable file"));
    }
    total += static_cast<int64_t>(fs::file_size(input, error));
  }
  if (total == 0) return absl::InvalidArgumentError("the input text is empty");
  return total;
}

std::vector<int32_t> EncodeChunk(const Tokenizer& tokenizer, const Chunk& chunk) {
  std::vector<int32_t> ids;
  ids.reserve(chunk.text.size() / 3);
  if (chunk.document_start) ids = tokenizer.DocumentPrefix();
  tokenizer.Encode(chunk.text, chunk.document_start, &ids);
  if (chunk.document_end) {
    for (int32_t id : tokenizer.DocumentSuffix()) ids.push_back(id);
  }
  return ids;
}

// Two token files and where each chunk's ids go.
class SplitWriter {
 public:
  absl::Status Open(const std::string& dir, int64_t vocab_size) {
    vocab_size_ = vocab_size;
    auto train = TokenFileWriter::Open(dir + "/train", vocab_size);
    if (!train.ok()) return train.status();
    auto val = TokenFileWriter::Open(dir + "/val", vocab_size);
    if (!val.ok()) return val.status();
    train_ = std::move(*train);
    val_ = std::move(*val);
    return absl::OkStatus();
  }
  absl::Status Write(const Chunk& chunk, const std::vector<int32_t>& ids) {
    for (int32_t id : ids) {
      if (id < 0 || id >= vocab_size_) {
        return absl::DataLossError(absl::StrCat("the tokenizer gave id ", id,
                                                ", outside its vocabulary of ", vocab_size_));
      }
    }
    return (chunk.val ? val_ : train_)->Append(ids);
  }
  int64_t val_tokens() const { return val_->count(); }
  const std::string& val_path() const { return val_->path(); }
  absl::StatusOr<TokenizedCorpus> Finish() {
    if (absl::Status s = train_->Finish(); !s.ok()) return s;
    if (absl::Status s = val_->Finish(); !s.ok()) return s;
    TokenizedCorpus out;
    out.train_path = train_->path();
    out.val_path = val_->path();
    out.train_tokens = train_->count();
    out.val_tokens = val_->count();
    return out;
  }
  int64_t tokens() const { return train_->count() + val_->count(); }

 private:
  int64_t vocab_size_ = 0;
  std::unique_ptr<TokenFileWriter> train_, val_;
};

// The refusal of a split that left the validation file empty.
absl::Status NoValidationText(const Tokenizer& tokenizer, const CorpusOptions& options,
                              int64_t split, int64_t total, const std::string& val_path) {
  // The split falls at a place the text may be cut (a line's end): a corpus with none after
  // it leaves the validation file empty, which no job can evaluate on.
  // A tokenizer whose ids a cut may change is split between files only.
  const std::string remedy =
      tokenizer.KeepsIdsAtCuts()
          ? absl::StrCat("found no line break after it to cut at (", val_path,
                         " would be empty); give more lines of text")
          : absl::StrCat(
                "falls inside the last document (this tokenizer's ids may change "
                "where a document is cut, so the split falls between input files "
                "only, and ",
                val_path, " would be empty); give another input file after it");
  return absl::InvalidArgumentError(absl::StrCat(
      "--val_fraction ", options.val_fraction, " left no validation text: the split at byte ",
      split, " of ", total, " ", remedy, ", or --val_fraction=0 for no validation file"));
}

// CheckCorpus's refusals of `options` alone.
absl::Status CheckOptions(const CorpusOptions& options) {
  if (!(options.val_fraction >= 0 && options.val_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--val_fraction must be in [0, 1), got ", options.val_fraction));
  }
  if (options.threads < 1 || options.threads > kMaxCorpusThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be in [1, ", kMaxCorpusThreads, "], got ", options.threads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCorpus(const std::vector<std::string>& inputs, const CorpusOptions& options) {
  if (absl::Status checked = CheckOptions(options); !checked.ok()) return checked;
  return CorpusBytes(inputs).status();
}

absl::StatusOr<TokenizedCorpus> TokenizeCorpus(const Tokenizer& tokenizer,
                                               const std::vector<std::string>& inputs,
                                               const std::string& out_dir,
                                               const CorpusOptions& options) {
  // CheckCorpus's refusals, each input looked at once.
  if (absl::Status checked = CheckOptions(options); !checked.ok()) return checked;
  auto total = CorpusBytes(inputs);
  if (!total.ok()) return total.status();
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("cannot create '", out_dir, "'"));
  SplitWriter writer;
  if (absl::Status s = writer.Open(out_dir, tokenizer.vocab_size()); !s.ok()) return s;

  const auto start = std::chrono::steady_clock::now();
  const auto split = static_cast<int64_t>(static_cast<double>(*total) * (1 - options.val_fraction));
  CorpusChunker chunker(inputs, split, options.chunk_bytes, tokenizer.KeepsIdsAtCuts());
  const int threads = options.threads;
  CorpusProgress progress;
  progress.bytes_total = *total;
  for (bool more = true; more;) {
    // A round: up to `threads` chunks read, encoded side by side, written in order.
    std::vector<Chunk> chunks;
    while (static_cast<int>(chunks.size()) < threads) {
      Chunk chunk;
      auto next = chunker.Next(&chunk);
      if (!next.ok()) return next.status();
      if (!(more = *next)) break;
      chunks.push_back(std::move(chunk));
    }
    std::vector<std::vector<int32_t>> ids(chunks.size());
    std::vector<std::thread> encoders;
    for (size_t i = 1; i < chunks.size(); ++i) {
      encoders.emplace_back([&, i] { ids[i] = EncodeChunk(tokenizer, chunks[i]); });
    }
    if (!chunks.empty()) ids[0] = EncodeChunk(tokenizer, chunks[0]);
    for (std::thread& encoder : encoders) encoder.join();
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (absl::Status s = writer.Write(chunks[i], ids[i]); !s.ok()) return s;
    }
    progress.bytes_done = chunker.bytes_read();
    progress.tokens = writer.tokens();
    progress.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.on_progress) options.on_progress(progress);
  }
  // Before the files are renamed into place: a refused run leaves the folder as it was.
  if (options.val_fraction > 0 && writer.val_tokens() == 0) {
    return NoValidationText(tokenizer, options, split, *total, writer.val_path());
  }
  auto out = writer.Finish();
  if (!out.ok()) return out.status();
  out->bytes = progress.bytes_done;
  out->seconds = progress.seconds;
  return out;
}

}  // namespace tokenizer
}  // namespace shardwise
