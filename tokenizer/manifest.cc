#include "tokenizer/manifest.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "common/safe_write.h"
#include "common/token_hash.h"
#include "common/untrusted_file.h"
#include "nlohmann/json.hpp"
#include "tokenizer/durable_rename.h"
#include "tokenizer/sentencepiece_model_check.h"

namespace shardwise {
namespace tokenizer {
namespace {

namespace fs = std::filesystem;
constexpr char kFormat[] = "shardwise-tokenizer/1";

absl::Status CheckFileName(const std::string& manifest, const std::string& role,
                           const std::string& name) {
  if (name.empty() || name == "." || name == ".." || absl::StrContains(name, "/") ||
      name == kManifestName) {
    return absl::InvalidArgumentError(
        absl::StrCat(manifest, ": files.", role, ".name \"", name, "\" is not a file name"));
  }
  return absl::OkStatus();
}

// json[key] when it is a string, else "" (nlohmann's value() throws on another type).
std::string StringField(const nlohmann::json& json, const char* key) {
  if (!json.is_object()) return "";
  auto it = json.find(key);
  return it != json.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<Manifest> ParseManifest(const std::string& path, const std::string& text) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto field_error = [&](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, " ", why));
  };
  if (!json.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  if (StringField(json, "format") != kFormat) {
    return field_error("format", absl::StrCat("is not \"", kFormat, "\""));
  }
  Manifest manifest;
  manifest.kind = StringField(json, "kind");
  if (manifest.kind != "bytes" && manifest.kind != "sentencepiece" && manifest.kind != "gpt2" &&
      manifest.kind != "tiktoken" && manifest.kind != "huggingface") {
    return field_error("kind", absl::StrCat("\"", ShownValue(manifest.kind),
                                            "\" is not bytes, sentencepiece, gpt2, tiktoken or "
                                            "huggingface"));
  }
  manifest.encoding = StringField(json, "encoding");
  const auto size = json.find("vocab_size");
  if (size == json.end() || !size->is_number_integer() || size->get<int64_t>() < 1) {
    return field_error("vocab_size", "is not a positive integer");
  }
  manifest.vocab_size = size->get<int64_t>();
  const auto files = json.find("files");
  if (files != json.end() && !files->is_object()) return field_error("files", "is not an object");
  const nlohmann::json no_files = nlohmann::json::object();
  for (const auto& [role, file] : (files != json.end() ? *files : no_files).items()) {
    Manifest::File entry{StringField(file, "name"), StringField(file, "sha256")};
    if (absl::Status s = CheckFileName(path, role, entry.name); !s.ok()) return s;
    if (entry.sha256.size() != 64) {
      return field_error(absl::StrCat("files.", role, ".sha256"), "is not a SHA-256 in hex");
    }
    manifest.files[role] = entry;
  }
  for (const auto& [key, id] :
       {std::pair("bos_id", &manifest.bos_id), std::pair("eos_id", &manifest.eos_id)}) {
    const auto field = json.find(key);
    if (field == json.end()) continue;
    if (!field->is_number_integer() || field->get<int64_t>() < 0 ||
        field->get<int64_t>() >= manifest.vocab_size) {
      return field_error(key, absl::StrCat("is not an id below vocab_size ", manifest.vocab_size));
    }
    *id = static_cast<int32_t>(field->get<int64_t>());
  }
  return manifest;
}

std::string ManifestText(const Manifest& manifest) {
  nlohmann::json json = {
      {"format", kFormat}, {"kind", manifest.kind}, {"vocab_size", manifest.vocab_size}};
  if (!manifest.encoding.empty()) json["encoding"] = manifest.encoding;
  if (manifest.bos_id.has_value()) json["bos_id"] = *manifest.bos_id;
  if (manifest.eos_id.has_value()) json["eos_id"] = *manifest.eos_id;
  json["files"] = nlohmann::json::object();
  for (const auto& [role, file] : manifest.files) {
    json["files"][role] = {{"name", file.name}, {"sha256", file.sha256}};
  }
  return json.dump(2) + "\n";
}

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  return ReadUntrustedFile(path, kMaxTokenizerFileBytes, Links::kFollow);
}

absl::StatusOr<Manifest> ReadManifest(const std::string& dir, Links links) {
  std::string path = (fs::path(dir) / kManifestName).string();
  auto text = ReadUntrustedFile(path, kMaxManifestBytes, InsideFolder(links));
  if (absl::IsNotFound(text.status())) {  // a folder written before the manifest's rename
    path = (fs::path(dir) / kLegacyManifestName).string();
    text = ReadUntrustedFile(path, kMaxManifestBytes, InsideFolder(links));
  }
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot be read (is ", dir, " a folder `shardwise tokenize` wrote?)"));
  }
  if (!text.ok()) return text.status();
  return ParseManifest(path, *text);
}

absl::Status WriteManifest(const std::string& dir, const Manifest& manifest) {
  return WriteFolderFile(dir, kManifestName, ManifestText(manifest));
}

absl::Status WriteFolderFile(const std::string& dir, const std::string& name,
                             const std::string& bytes) {
  const fs::path path = fs::path(dir) / name;
  const std::string tmp = path.string() + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();  // the buffered bytes' write, whose failure (a full disk) shows here
  if (!out.good()) return absl::ResourceExhaustedError(absl::StrCat("cannot write ", tmp));
  return SyncAndRename(tmp, path.string());
}

absl::StatusOr<std::string> FileSha256(const std::string& path) {
  auto bytes = ReadFileBytes(path);
  if (!bytes.ok()) return bytes.status();
  return TokenHash(*bytes);
}

absl::StatusOr<std::string> ReadCheckedFile(const std::string& dir, const Manifest::File& file,
                                            Links links) {
  const std::string path = (fs::path(dir) / file.name).string();
  auto bytes = ReadUntrustedFile(path, kMaxTokenizerFileBytes, InsideFolder(links));
  if (!bytes.ok()) return bytes.status();
  const std::string sha256 = TokenHash(*bytes);
  if (sha256 != file.sha256) {
    return absl::DataLossError(absl::StrCat(path, ": its SHA-256 is ", sha256, ", not the ",
                                            file.sha256, " its ", kManifestName, " names"));
  }
  return bytes;
}

absl::StatusOr<Manifest> CheckTokenizerFolder(const std::string& dir, Links links) {
  auto manifest = ReadManifest(dir, links);
  if (!manifest.ok()) return manifest.status();
  for (const auto& [role, file] : manifest->files) {
    auto bytes = ReadCheckedFile(dir, file, links);
    if (!bytes.ok()) return bytes.status();
    if (manifest->kind == "sentencepiece" && role == "model") {
      absl::Status model = CheckSentencePieceModel(*bytes, (fs::path(dir) / file.name).string());
      if (!model.ok()) return model;
    }
  }
  return manifest;
}

std::string ModelTokenizerFolder(const std::string& model_path) {
  fs::path path(model_path);
  if (path.extension() == ".safetensors") path.replace_extension();
  return path.string() + ".tokenizer";
}

namespace {

// Copies the files of the folder `from` into `to`, each under the name `name_in_copy`
// gives its role (nullopt: not copied), read once (hashed, then written) and written
// unless the same bytes are there; returns the folder's manifest.
absl::StatusOr<Manifest> CopyFolderFiles(
    const std::string& from, const std::string& to, bool replace, Links links,
    const std::function<std::optional<std::string>(const Manifest&, const std::string& role)>&
        name_in_copy) {
  auto manifest = ReadManifest(from, links);
  if (!manifest.ok()) return manifest.status();
  if (absl::Status s = CreateFolders(to); !s.ok()) return s;
  for (const auto& [role, file] : manifest->files) {
    const std::optional<std::string> name = name_in_copy(*manifest, role);
    if (!name.has_value()) continue;
    auto bytes = ReadCheckedFile(from, file, links);
    if (!bytes.ok()) return bytes.status();
    absl::Status written = WriteFileUnlessSame((fs::path(to) / *name).string(), *bytes, replace);
    if (!written.ok()) return written;
  }
  return manifest;
}

}  // namespace

absl::Status CopyTokenizerFolder(const std::string& from, const std::string& to, bool replace,
                                 Links links) {
  auto manifest = CopyFolderFiles(from, to, replace, links,
                                  [](const Manifest& manifest, const std::string& role) {
                                    return std::optional<std::string>(manifest.files.at(role).name);
                                  });
  if (!manifest.ok()) return manifest.status();
  return WriteFileUnlessSame((fs::path(to) / kManifestName).string(), ManifestText(*manifest),
                             replace);
}

std::optional<std::string> HuggingFaceFileName(const std::string& kind, const std::string& role) {
  if (role == "tokenizer_config_json") return "tokenizer_config.json";
  if (kind == "huggingface" && role == "tokenizer_json") return "tokenizer.json";
  if (kind == "sentencepiece" && role == "model") return "tokenizer.model";
  if (kind == "gpt2" && role == "encoder_json") return "vocab.json";
  if (kind == "gpt2" && role == "vocab_bpe") return "merges.txt";
  return std::nullopt;
}

absl::StatusOr<Manifest> CopyHuggingFaceTokenizer(const std::string& from, const std::string& to,
                                                  bool replace, Links links) {
  return CopyFolderFiles(from, to, replace, links,
                         [](const Manifest& manifest, const std::string& role) {
                           return HuggingFaceFileName(manifest.kind, role);
                         });
}

}  // namespace tokenizer
}  // namespace shardwise
