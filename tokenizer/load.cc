#include "tokenizer/load.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace shardwise {
namespace tokenizer {
namespace {

namespace fs = std::filesystem;

// The file each role is saved as in a tokenizer folder.
std::string FolderName(const std::string& role) {
  if (role == "model") return "tokenizer.model";
  if (role == "encoder_json") return "encoder.json";
  if (role == "vocab_bpe") return "vocab.bpe";
  return "ranks.tiktoken";
}

absl::StatusOr<std::string> PathOf(const TokenizerFiles& files, const std::string& role) {
  auto it = files.paths.find(role);
  if (it == files.paths.end() || it->second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", files.kind, " tokenizer needs its ", role, " file"));
  }
  return it->second;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromFiles(const TokenizerFiles& files) {
  if (files.kind == "bytes") return std::unique_ptr<Tokenizer>(new ByteTokenizer());
  if (files.kind == "sentencepiece") {
    auto model = PathOf(files, "model");
    if (!model.ok()) return model.status();
    return SentencePieceTokenizer::Load(*model);
  }
  if (files.kind == "gpt2") {
    auto encoder_json = PathOf(files, "encoder_json");
    if (!encoder_json.ok()) return encoder_json.status();
    auto vocab_bpe = PathOf(files, "vocab_bpe");
    if (!vocab_bpe.ok()) return vocab_bpe.status();
    return ByteLevelBpe::FromGpt2Files(*encoder_json, *vocab_bpe);
  }
  if (files.kind == "tiktoken") {
    auto ranks = PathOf(files, "ranks");
    if (!ranks.ok()) return ranks.status();
    return ByteLevelBpe::FromTiktoken(*ranks, files.encoding);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "tokenizer \"", files.kind, "\" is unknown; known: bytes, sentencepiece, gpt2, tiktoken"));
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
  TokenizerFiles files{manifest->kind, manifest->encoding, {}};
  for (const auto& [role, file] : manifest->files) {
    auto path = CheckedFilePath(dir, file);
    if (!path.ok()) return path.status();
    files.paths[role] = *path;
  }
  auto loaded = LoadFromFiles(files);
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
