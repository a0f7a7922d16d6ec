#include "tokenizer/load.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/huggingface/huggingface_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {
namespace {

namespace fs = std::filesystem;

// The file each role is saved as in a tokenizer folder.
std::string FolderName(const std::string& role) {
  if (role == "model") return "tokenizer.model";
  if (role == "encoder_json") return "encoder.json";
  if (role == "vocab_bpe") return "vocab.bpe";
  if (role == "tokenizer_json") return "tokenizer.json";  // Hugging Face's name for it
  return "ranks.tiktoken";
}

const FileBytes* RoleOf(const std::string& kind, const std::map<std::string, FileBytes>& files,
                        const std::string& role, absl::Status* missing) {
  auto it = files.find(role);
  if (it == files.end()) {
    *missing = absl::InvalidArgumentError(
        absl::StrCat("a ", kind, " tokenizer needs its ", role, " file"));
    return nullptr;
  }
  return &it->second;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromBytes(
    const std::string& kind, const std::string& encoding,
    const std::map<std::string, FileBytes>& files) {
  absl::Status missing;
  if (kind == "bytes") return std::unique_ptr<Tokenizer>(new ByteTokenizer());
  if (kind == "sentencepiece") {
    const FileBytes* model = RoleOf(kind, files, "model", &missing);
    if (model == nullptr) return missing;
    return SentencePieceTokenizer::FromSerialized(model->bytes, model->name);
  }
  if (kind == "gpt2") {
    const FileBytes* encoder_json = RoleOf(kind, files, "encoder_json", &missing);
    const FileBytes* vocab_bpe = RoleOf(kind, files, "vocab_bpe", &missing);
    if (encoder_json == nullptr || vocab_bpe == nullptr) return missing;
    auto vocabulary =
        ParseGpt2Files(encoder_json->name, encoder_json->bytes, vocab_bpe->name, vocab_bpe->bytes);
    if (!vocabulary.ok()) return vocabulary.status();
    return ByteLevelBpe::FromGpt2Vocabulary(*vocabulary, encoder_json->name);
  }
  if (kind == "huggingface") {
    const FileBytes* json = RoleOf(kind, files, "tokenizer_json", &missing);
    if (json == nullptr) return missing;
    auto tokenizer = HuggingFaceTokenizer::FromJson(json->bytes, json->name);
    if (!tokenizer.ok()) return tokenizer.status();
    return std::unique_ptr<Tokenizer>(std::move(*tokenizer));
  }
  if (kind == "tiktoken") {
    const FileBytes* ranks = RoleOf(kind, files, "ranks", &missing);
    if (ranks == nullptr) return missing;
    auto tokens = ParseTiktoken(ranks->name, ranks->bytes);
    if (!tokens.ok()) return tokens.status();
    return ByteLevelBpe::FromTiktokenRanks(*tokens, ranks->name, encoding);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer \"", ShownValue(kind),
                   "\" is unknown; known: bytes, sentencepiece, gpt2, tiktoken, huggingface"));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFiles(const TokenizerFiles& files) {
  std::map<std::string, FileBytes> bytes;
  for (const auto& [role, path] : files.paths) {
    if (path.empty()) continue;
    auto read = ReadFileBytes(path);
    if (!read.ok()) return read.status();
    bytes[role] = {path, std::move(*read)};
  }
  return LoadFromBytes(files.kind, files.encoding, bytes);
}

absl::StatusOr<Manifest> SaveTokenizerFolder(const std::string& dir, const TokenizerFiles& files,
                                             int64_t vocab_size) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir));
  Manifest manifest{files.kind, files.encoding, vocab_size, {}};
  for (const auto& [role, path] : files.paths) {
    const std::string name = FolderName(role);
    const fs::path copy = fs::path(dir) / name;
    if (fs::weakly_canonical(path, error) != fs::weakly_canonical(copy, error)) {
      fs::copy_file(path, copy, fs::copy_options::overwrite_existing, error);
      if (error)
        return absl::PermissionDeniedError(absl::StrCat("cannot copy ", path, " to ", dir));
    }
    auto sha256 = FileSha256(copy.string());
    if (!sha256.ok()) return sha256.status();
    manifest.files[role] = {name, *sha256};
  }
  if (absl::Status s = WriteManifest(dir, manifest); !s.ok()) return s;
  return manifest;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& dir) {
  auto manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  std::map<std::string, FileBytes> files;
  for (const auto& [role, file] : manifest->files) {
    auto bytes = ReadCheckedFile(dir, file);
    if (!bytes.ok()) return bytes.status();
    files[role] = {(fs::path(dir) / file.name).string(), std::move(*bytes)};
  }
  auto loaded = LoadFromBytes(manifest->kind, manifest->encoding, files);
  if (!loaded.ok()) return loaded.status();
  if ((*loaded)->vocab_size() != manifest->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(dir, "/", kManifestName, ": vocab_size is ",
                                                   manifest->vocab_size, " but its files hold ",
                                                   (*loaded)->vocab_size(), " tokens"));
  }
  return loaded;
}

}  // namespace tokenizer
}  // namespace shardwise
