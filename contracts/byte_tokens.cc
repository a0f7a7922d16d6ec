#include "contracts/byte_tokens.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardwise {
namespace {

absl::Status WriteIds(const std::string& path, const std::string& bytes, size_t begin, size_t end) {
  std::vector<uint16_t> ids;
  ids.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) ids.push_back(static_cast<unsigned char>(bytes[i]));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char*>(ids.data()),
               static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
    if (!file.good()) return absl::PermissionDeniedError(absl::StrCat("cannot write '", tmp, "'"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot rename '", tmp, "' to '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizedText> TokenizeBytes(const std::vector<std::string>& inputs,
                                            const std::string& out_dir, double val_fraction) {
  if (!(val_fraction >= 0 && val_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--val_fraction must be in [0, 1), got ", val_fraction));
  }
  std::string text;
  for (const std::string& input : inputs) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(input, error)) {
      return absl::NotFoundError(absl::StrCat("'", input, "' is not a readable file"));
    }
    std::ifstream file(input, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    text += bytes.str();
  }
  if (text.empty()) return absl::InvalidArgumentError("the input text is empty");
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create '", out_dir, "': ", error.message()));
  }
  TokenizedText out;
  out.val_tokens = static_cast<int64_t>(text.size() * val_fraction);
  out.train_tokens = static_cast<int64_t>(text.size()) - out.val_tokens;
  out.train_path = out_dir + "/train.bin";
  out.val_path = out_dir + "/val.bin";
  if (absl::Status s = WriteIds(out.train_path, text, 0, out.train_tokens); !s.ok()) return s;
  if (absl::Status s = WriteIds(out.val_path, text, out.train_tokens, text.size()); !s.ok())
    return s;
  return out;
}

std::vector<int64_t> BytesToIds(const std::string& text) {
  std::vector<int64_t> ids;
  for (unsigned char c : text) ids.push_back(c);
  return ids;
}

std::string IdsToPrintable(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= kByteVocabulary) {
      absl::StrAppend(&out, "<", id, ">");
    } else if ((id < 0x20 && id != '\n' && id != '\t') || id == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", id));
    } else {
      out.push_back(static_cast<char>(id));
    }
  }
  return out;
}

}  // namespace shardwise
