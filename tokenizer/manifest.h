#ifndef SHARDWISE_TOKENIZER_MANIFEST_H_
#define SHARDWISE_TOKENIZER_MANIFEST_H_

// A tokenizer folder: what `shardwise tokenize` writes beside its token files, a job names
// (data.tokens.tokenizer) and the final model's folder gets a copy of. Its manifest
// (shardwise-tokenizer.json) says which kind, which encoding, the vocabulary size and each
// file with its SHA-256; the files sit beside it. Loading (load.h) checks every file
// against its hash, and so does the coordinator at submission.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"

namespace shardwise {
namespace tokenizer {

// The manifest's name: not tokenizer.json, which every Hugging Face tool takes for its own
// format (and which a folder of the huggingface kind holds). Folders written before this
// name have their manifest as tokenizer.json, which ReadManifest still reads.
inline constexpr char kManifestName[] = "shardwise-tokenizer.json";
inline constexpr char kLegacyManifestName[] = "tokenizer.json";

struct Manifest {
  std::string kind;      // "bytes", "sentencepiece", "gpt2", "tiktoken" or "huggingface"
  std::string encoding;  // tiktoken: its encoding's name (encodings.h)
  int64_t vocab_size = 0;
  // Each file's role ("model"; "encoder_json", "vocab_bpe"; "ranks"; "tokenizer_json") ->
  // its name in the folder and its SHA-256 in hex.
  struct File {
    std::string name, sha256;
  };
  std::map<std::string, File> files;
  // The ids a model trained on the folder's token files starts a document with and stops
  // at: Hugging Face's bos_token_id and eos_token_id (load.h says how each kind's are
  // chosen). nullopt: none, or a folder written before they were recorded.
  std::optional<int32_t> bos_id, eos_id;
};

// The name Hugging Face's tools read a tokenizer folder's file of `role` by, in a folder
// of `kind` ("tokenizer_json" -> tokenizer.json; SentencePiece's "model" ->
// tokenizer.model; GPT-2's "encoder_json" -> vocab.json and "vocab_bpe" -> merges.txt;
// "tokenizer_config_json" -> tokenizer_config.json); nullopt for a file they do not read
// (tiktoken's ranks).
std::optional<std::string> HuggingFaceFileName(const std::string& kind, const std::string& role);

// Every name HuggingFaceFileName gives, for the check at submission that an export
// replaces no one's files.
inline constexpr const char* kHuggingFaceTokenizerNames[] = {
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "merges.txt"};

// DIR/tokenizer.json, read as ReadCheckedFile reads (no link, a regular file of at most
// kMaxManifestBytes). NOT_FOUND when it is missing, INVALID_ARGUMENT naming the file and
// the field that is wrong (an unknown kind, a file name with a '/', a size below 1).
// Here and below, `links` says how the folder's own path is opened
// (common/untrusted_file.h): followed for a path a person typed, Links::kRefuseAll for a
// job's checked path on a worker; the files in it are never read through a link.
absl::StatusOr<Manifest> ReadManifest(const std::string& dir, Links links = Links::kFollow);

// Writes DIR/tokenizer.json (whole, then renamed into place), replacing one there.
absl::Status WriteManifest(const std::string& dir, const Manifest& manifest);

// Writes `bytes` as DIR/NAME as WriteManifest writes the manifest.
absl::Status WriteFolderFile(const std::string& dir, const std::string& name,
                             const std::string& bytes);

// What a tokenizer file and a manifest may weigh: the largest published tokenizers are
// far below (Gemma 3's tokenizer.json 33 MB, its tokenizer.model 4.7 MB, o200k's ranks
// 3.6 MB), and the coordinator reads a job's whole folder at submission.
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxManifestBytes = uint64_t{1} << 20;

// A file the user names (`shardwise tokenize`'s vocabulary files): a regular file of at
// most kMaxTokenizerFileBytes (common/untrusted_file.h: a FIFO or a device is refused,
// never waited on); NOT_FOUND naming the path when it is missing.
absl::StatusOr<std::string> ReadFileBytes(const std::string& path);

// The SHA-256 of a file's bytes (read as ReadFileBytes does), in hex.
absl::StatusOr<std::string> FileSha256(const std::string& path);

// The bytes of DIR/FILE.name, a file of a tokenizer folder, read once: never through a
// link (the path policy checked the folder, not the names in it), a regular file of at
// most kMaxTokenizerFileBytes, its SHA-256 FILE.sha256 (DATA_LOSS when not).
absl::StatusOr<std::string> ReadCheckedFile(const std::string& dir, const Manifest::File& file,
                                            Links links = Links::kFollow);

// A job's tokenizer folder as the coordinator checks it at submission and a worker at the
// start of an attempt: its manifest, every file it names read as ReadCheckedFile does, and
// what can be checked of their contents without loading them (a SentencePiece model's
// normaliser, sentencepiece_model_check.h).
absl::StatusOr<Manifest> CheckTokenizerFolder(const std::string& dir, Links links = Links::kFollow);

// Where a final model's copy of its job's tokenizer lies: MODEL.safetensors ->
// MODEL.tokenizer (beside it, so the pair moves together).
std::string ModelTokenizerFolder(const std::string& model_path);

// Copies the folder `from` (its manifest and its files, each checked against its hash) to
// `to`, made if missing, as a job writes its outputs (common/safe_write.h: no symlink
// followed, each file whole or not at all, the manifest last). Files there are replaced
// only if `replace`, else ALREADY_EXISTS, except a regular file already holding the same
// bytes, which is left as it is (a re-queued attempt of the job that copied it).
absl::Status CopyTokenizerFolder(const std::string& from, const std::string& to, bool replace,
                                 Links links = Links::kFollow);

// Copies the files of the folder `from` that Hugging Face's tools read into `to` under
// their names (HuggingFaceFileName), on CopyTokenizerFolder's terms; returns the folder's
// manifest (its BOS and EOS ids). What `AutoTokenizer.from_pretrained(to)` loads: its
// tokenizer_config.json says which class (docs/job-spec.md, "Tokenizers").
absl::StatusOr<Manifest> CopyHuggingFaceTokenizer(const std::string& from, const std::string& to,
                                                  bool replace, Links links = Links::kFollow);

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_MANIFEST_H_
