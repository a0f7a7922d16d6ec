#ifndef SHARDWISE_TOKENIZER_MANIFEST_H_
#define SHARDWISE_TOKENIZER_MANIFEST_H_

// A tokenizer folder: what `shardwise tokenize` writes beside its token files, a job names
// (data.tokens.tokenizer) and the final model's folder gets a copy of. Its tokenizer.json
// says which kind, which encoding, the vocabulary size and each file with its SHA-256; the
// files sit beside it. The coordinator reads only tokenizer.json (the vocabulary size, at
// submission); loading (load.h) checks every file against its hash.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace shardwise {
namespace tokenizer {

inline constexpr char kManifestName[] = "tokenizer.json";

struct Manifest {
  std::string kind;      // "bytes", "sentencepiece", "gpt2" or "tiktoken"
  std::string encoding;  // tiktoken: its encoding's name (encodings.h)
  int64_t vocab_size = 0;
  // Each file's role ("model"; "encoder_json", "vocab_bpe"; "ranks") -> its name in the
  // folder and its SHA-256 in hex.
  struct File {
    std::string name, sha256;
  };
  std::map<std::string, File> files;
};

// DIR/tokenizer.json. NOT_FOUND when it is missing, INVALID_ARGUMENT naming the file and
// the field that is wrong (an unknown kind, a file name with a '/', a size below 1).
absl::StatusOr<Manifest> ReadManifest(const std::string& dir);

// Writes DIR/tokenizer.json (whole, then renamed into place), replacing one there.
absl::Status WriteManifest(const std::string& dir, const Manifest& manifest);

// A file's bytes; NOT_FOUND naming the path when it cannot be read.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// The SHA-256 of a file's bytes, in hex; NOT_FOUND when it cannot be read.
absl::StatusOr<std::string> FileSha256(const std::string& path);

// DIR/FILE.name, once its bytes are checked against FILE.sha256: DATA_LOSS when they
// differ, NOT_FOUND when it cannot be read.
absl::StatusOr<std::string> CheckedFilePath(const std::string& dir, const Manifest::File& file);

// Where a final model's copy of its job's tokenizer lies: MODEL.safetensors ->
// MODEL.tokenizer (beside it, so the pair moves together).
std::string ModelTokenizerFolder(const std::string& model_path);

// Copies the folder `from` (its manifest and its files, each checked against its hash) to
// `to`, made if missing, as a job writes its outputs (common/safe_write.h: no symlink
// followed, each file whole or not at all, the manifest last). Files there are replaced
// only if `replace`, else ALREADY_EXISTS, except a regular file already holding the same
// bytes, which is left as it is (a re-queued attempt of the job that copied it).
absl::Status CopyTokenizerFolder(const std::string& from, const std::string& to, bool replace);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_MANIFEST_H_
