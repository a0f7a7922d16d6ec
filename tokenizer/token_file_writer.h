#ifndef SHARDWISE_TOKENIZER_TOKEN_FILE_WRITER_H_
#define SHARDWISE_TOKENIZER_TOKEN_FILE_WRITER_H_

// Writes a token file as the workers read it (contracts/token_files.h), streaming: raw
// little-endian uint16 (nanoGPT's train.bin) when every id fits, else a safetensors file
// whose 1-D I32 tensor "tokens" grows as ids come and whose header is written last (into
// room left for it at the front). Written under PATH.tmp, renamed into place by Finish.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise {
namespace tokenizer {

class TokenFileWriter {
 public:
  // STEM.bin for a vocabulary of at most 65,536 ids, STEM.safetensors above.
  static absl::StatusOr<std::unique_ptr<TokenFileWriter>> Open(const std::string& stem,
                                                               int64_t vocab_size);

  // A writer destroyed unfinished (its run refused or failed) removes its PATH.tmp.
  ~TokenFileWriter();

  absl::Status Append(const std::vector<int32_t>& ids);
  absl::Status Finish();

  const std::string& path() const { return path_; }
  int64_t count() const { return count_; }

 private:
  TokenFileWriter(std::string path, bool wide) : path_(std::move(path)), wide_(wide) {}

  std::string path_;
  bool wide_;  // I32 in safetensors
  std::ofstream out_;
  int64_t count_ = 0;
  bool finished_ = false;
};

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_TOKEN_FILE_WRITER_H_
