#ifndef SHARDWISE_WORKER_DATA_TOKENS_H_
#define SHARDWISE_WORKER_DATA_TOKENS_H_

// Token files for GPT jobs (data.tokens) and the sequences each step trains on.
//
// A token file is a flat sequence of ids: raw little-endian uint16 (nanoGPT's train.bin)
// or a safetensors file with a 1-D tensor "tokens" of U16, I32 or I64
// (contracts/token_files.h). It is mapped, not read: a file of billions of tokens costs address
// space, not memory. Opening checks it whole: a regular file, well formed, at least block_size + 1
// tokens, every id below vocab_size (a bad id is an INVALID_ARGUMENT naming the field, the file and
// the offset).
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

#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/data/batch.h"

namespace shardwise {

// SplitMix64's output for `index`: z = seed + (index + 1) * 0x9E3779B97F4A7C15, then
// z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB;
// z ^= z >> 31 (all mod 2^64); the start is z mod (num_tokens - block_size).
int64_t SequenceStart(uint64_t seed, int64_t index, int64_t num_tokens, int64_t block_size);

class TokenFile {
 public:
  // `field` names the spec field in errors ("data.tokens.train_path").
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& field,
                                                         const std::string& path,
                                                         v1::TokenData::Format format,
                                                         int64_t vocab_size, int64_t block_size);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return count_; }
  int64_t at(int64_t i) const;

 private:
  TokenFile(const void* map, size_t map_bytes, const char* tokens, int element, int64_t count)
      : map_(map), map_bytes_(map_bytes), tokens_(tokens), element_(element), count_(count) {}
  const void* const map_;
  const size_t map_bytes_;
  const char* const tokens_;  // the first id, inside the mapping
  const int element_;         // bytes per id: 2, 4 or 8
  const int64_t count_;
};

// The micro-batch of `count` sequences from global index `first` on (see above).
MicroBatch TokenMicroBatch(const TokenFile& file, uint64_t seed, int64_t first, int64_t count,
                           int64_t block_size);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_TOKENS_H_
