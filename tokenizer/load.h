#ifndef SHARDWISE_TOKENIZER_LOAD_H_
#define SHARDWISE_TOKENIZER_LOAD_H_

// Making a tokenizer from the user's files, saving it as a tokenizer folder (manifest.h)
// and loading it from one.

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/manifest.h"
#include "tokenizer/tokenizer.h"

namespace shardwise {
namespace tokenizer {

// Which tokenizer, from which files: kind "bytes" (no files), "sentencepiece" (role
// "model": a tokenizer.model), "gpt2" ("encoder_json" and "vocab_bpe"), "tiktoken"
// ("ranks": a .tiktoken file, with `encoding`) or "huggingface" ("tokenizer_json": a
// Hugging Face tokenizer.json, huggingface/huggingface_tokenizer.h; optionally
// "tokenizer_config_json", the tokenizer_config.json beside it).
struct TokenizerFiles {
  std::string kind;
  std::string encoding;
  std::map<std::string, std::string> paths;  // role -> path
};

// INVALID_ARGUMENT naming a missing role or an unknown kind; the loaders' errors. Each
// file is read as ReadFileBytes does (manifest.h).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFiles(const TokenizerFiles& files);

// The same from the files' bytes, each read once by the caller (a tokenizer folder's
// after their hashes were checked); `name` names a file in errors.
struct FileBytes {
  std::string name;
  std::string bytes;
};
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromBytes(
    const std::string& kind, const std::string& encoding,
    const std::map<std::string, FileBytes>& files);

// Copies the files into DIR (made if missing) under their roles' names (a file that is
// already that one is kept), with what transformers needs to load them
// (transformers_config.h: a tokenizer_config.json, the user's for role
// "tokenizer_config_json" or one made for the kind), and writes the manifest with their
// hashes, `tokenizer`'s vocabulary size and its BOS and EOS ids.
absl::StatusOr<Manifest> SaveTokenizerFolder(const std::string& dir, const TokenizerFiles& files,
                                             const Tokenizer& tokenizer);

// The tokenizer of a folder SaveTokenizerFolder wrote. DATA_LOSS when a file's hash is not
// the one its manifest names; INVALID_ARGUMENT when the vocabulary's size is not.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_LOAD_H_
