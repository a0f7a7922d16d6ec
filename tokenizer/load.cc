#include "tokenizer/load.h"

#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "common/token_hash.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/huggingface/huggingface_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/transformers_config.h"
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
  if (role == "tokenizer_json") return "tokenizer.json";  // Hugging Face's names for them
  if (role == "tokenizer_config_json") return "tokenizer_config.json";
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

namespace {

// The user's tokenizer_config.json, when `files` names one.
absl::StatusOr<std::optional<UserConfig>> ReadUserConfig(const TokenizerFiles& files) {
  const auto it = files.paths.find("tokenizer_config_json");
  if (it == files.paths.end() || it->second.empty()) return std::optional<UserConfig>();
  auto bytes = ReadFileBytes(it->second);
  if (!bytes.ok()) return bytes.status();
  return std::optional<UserConfig>(UserConfig{it->second, std::move(*bytes)});
}

// Copies `path` to DIR/NAME unless it is that file already; returns the copy's entry.
absl::StatusOr<Manifest::File> CopyIntoFolder(const std::string& path, const std::string& dir,
                                              const std::string& name) {
  std::error_code error;
  const fs::path copy = fs::path(dir) / name;
  if (fs::weakly_canonical(path, error) != fs::weakly_canonical(copy, error)) {
    fs::copy_file(path, copy, fs::copy_options::overwrite_existing, error);
    if (error) return absl::PermissionDeniedError(absl::StrCat("cannot copy ", path, " to ", dir));
  }
  auto sha256 = FileSha256(copy.string());
  if (!sha256.ok()) return sha256.status();
  return Manifest::File{name, *sha256};
}

// Writes `bytes` as DIR/NAME; returns its entry.
absl::StatusOr<Manifest::File> WriteIntoFolder(const std::string& bytes, const std::string& dir,
                                               const std::string& name) {
  if (absl::Status s = WriteFolderFile(dir, name, bytes); !s.ok()) return s;
  return Manifest::File{name, TokenHash(bytes)};
}

}  // namespace

absl::StatusOr<Manifest> SaveTokenizerFolder(const std::string& dir, const TokenizerFiles& files,
                                             const Tokenizer& tokenizer) {
  auto user_config = ReadUserConfig(files);
  if (!user_config.ok()) return user_config.status();
  auto transformers = MakeTransformersConfig(files.kind, tokenizer,
                                             user_config->has_value() ? &**user_config : nullptr);
  if (!transformers.ok()) return transformers.status();
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir));
  Manifest manifest{files.kind, files.encoding,       tokenizer.vocab_size(),
                    {},         transformers->bos_id, transformers->eos_id};
  for (const auto& [role, path] : files.paths) {
    if (path.empty()) continue;
    auto file = CopyIntoFolder(path, dir, FolderName(role));
    if (!file.ok()) return file.status();
    manifest.files[role] = *file;
  }
  if (!user_config->has_value() && !transformers->tokenizer_config_json.empty()) {
    auto file = WriteIntoFolder(transformers->tokenizer_config_json, dir,
                                FolderName("tokenizer_config_json"));
    if (!file.ok()) return file.status();
    manifest.files["tokenizer_config_json"] = *file;
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
