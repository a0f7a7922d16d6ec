#ifndef SHARDWISE_WORKER_DATA_TOKENS_H_
#define SHARDWISE_WORKER_DATA_TOKENS_H_

// Token files for GPT jobs (data.tokens) and the sequences each step trains on.
//
// A token file is a flat sequence of ids: raw little-endian uint16 (nanoGPT's train.bin)
// or a safetensors file with a 1-D tensor "tokens" of U16, I32 or I64
// (contracts/token_files.h). It is read a sequence at a time (pread), not held: a file of
// billions of tokens costs neither memory nor address space. Opening checks it whole: a regular
// file, well formed, at least block_size + 1 tokens, every id below vocab_size (a bad id is an
// INVALID_ARGUMENT naming the field, the file and the offset). Each read checks again what it
// reads: a file cut short or rewritten while a job trains on it (nanoGPT's prepare.py writes in
// place) fails the attempt with DATA_LOSS or INVALID_ARGUMENT naming it, where a mapping would
// have killed the worker (SIGBUS) or handed the model an id past its embedding.
//
// Batching (docs/job-spec.md, "Token batches", states it for anyone to reproduce):
// sequence j (0 <= j < B) of step s starts at SequenceStart(seed, s * B + j, N, T), with
// B = global_batch_size, N tokens in the file and T = block_size; its inputs are tokens
// [start, start + T) and its labels [start + 1, start + T + 1). Rank r of W takes
// sequences [r * B/W, (r + 1) * B/W), split evenly over the accumulation micro-steps.
// Evaluation batch k takes, in the validation file, the sequences s * B + j with s = k,
// the same every time.
//
// Thread-safety: a TokenFile is immutable once open.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "proto/job_spec.pb.h"
#include "worker/data/batch.h"
#include "worker/data/data_identity.h"

namespace shardwise {

// SplitMix64's output for `index`: z = seed + (index + 1) * 0x9E3779B97F4A7C15, then
// z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
// z ^= z >> 31 (all mod 2^64); the start is z mod (num_tokens - block_size).
int64_t SequenceStart(uint64_t seed, int64_t index, int64_t num_tokens, int64_t block_size);

// What the model asks of a token file: ids below vocab_size, at least block_size + 1 of
// them; `field` ("model.gpt", "model.llama": ModelField) names the two in errors.
struct TokenModel {
  std::string field;
  int64_t vocab_size = 0;
  int64_t block_size = 0;
};

class TokenFile {
 public:
  // `field` names the spec field in errors ("data.tokens.train_path"); `links` says how
  // `path` is opened (common/untrusted_file.h; Links::kRefuseAll for a job's checked path).
  // The file is inspected and read through one descriptor: a file put at the path
  // meanwhile is never read with another's layout.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& field,
                                                         const std::string& path,
                                                         v1::TokenData::Format format,
                                                         const TokenModel& model, Links links);
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return count_; }
  // Of every id as the file was opened (worker/data/data_identity.h).
  uint64_t fingerprint() const { return fingerprint_; }
  // Ids [first, first + count) into `ids` (resized); `first + count` at most size().
  absl::Status Read(int64_t first, int64_t count, std::vector<int64_t>* ids) const;

 private:
  TokenFile(std::string field, std::string path, UntrustedFile file, uint64_t offset, int element,
            int64_t count, TokenModel model)
      : field_(std::move(field)),
        path_(std::move(path)),
        file_(std::move(file)),
        offset_(offset),
        element_(element),
        count_(count),
        model_(std::move(model)) {}
  // Read, with `when` after the message of a bad id.
  absl::Status ReadIds(int64_t first, int64_t count, std::vector<int64_t>* ids,
                       const char* when) const;
  // The first id of [first, first + count) below 0 or at or above the vocabulary,
  // INVALID_ARGUMENT naming it and its offset.
  absl::Status CheckIds(int64_t first, const std::vector<int64_t>& ids, const char* when) const;

  const std::string field_, path_;
  const UntrustedFile file_;
  const uint64_t offset_;  // of the first id, in bytes
  const int element_;      // bytes per id: 2, 4 or 8
  const int64_t count_;
  const TokenModel model_;
  uint64_t fingerprint_ = 0;  // set by Open, once
};

// The micro-batch of `count` sequences from global index `first` on (see above).
absl::StatusOr<MicroBatch> TokenMicroBatch(const TokenFile& file, uint64_t seed, int64_t first,
                                           int64_t count, int64_t block_size);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_TOKENS_H_
