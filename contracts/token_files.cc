#include "contracts/token_files.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_failure.h"
#include "contracts/safetensors.h"

namespace shardwise {
absl::Status TokenFileInvalid(const std::string& field, const std::string& path,
                              const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("job.", field, " '", path, "': ", what));
}

absl::Status TokenFileReadFailure(const std::string& field, const std::string& path,
                                  const absl::Status& read) {
  return FieldFailure(absl::StrCat("job.", field, " '", path, "'"), read);
}

v1::TokenData::Format ResolveTokenFormat(const std::string& path, v1::TokenData::Format format) {
  if (format != v1::TokenData::FORMAT_UNSPECIFIED) return format;
  return absl::EndsWith(path, ".safetensors") ? v1::TokenData::SAFETENSORS : v1::TokenData::UINT16;
}

absl::StatusOr<UntrustedFile> OpenTokenFile(const std::string& field, const std::string& path,
                                            Links links) {
  if (links == Links::kFollow) {  // the opening below says as much where links are refused
    std::error_code error;
    const auto status = std::filesystem::status(path, error);
    if (error || !std::filesystem::exists(status))
      return TokenFileInvalid(field, path, "no such file");
    if (!std::filesystem::is_regular_file(status)) {
      return TokenFileInvalid(field, path, "is not a regular file");
    }
  }
  // Any size (a token file is read a sequence at a time, never whole: not bounded by
  // kMaxSafetensorsFileBytes, which 18 billion I32 ids outgrow).
  absl::StatusOr<UntrustedFile> file =
      UntrustedFile::Open(path, kIndexedSafetensorsFileBytes, links);
  if (absl::IsNotFound(file.status())) return TokenFileInvalid(field, path, "no such file");
  if (!file.ok()) return TokenFileReadFailure(field, path, file.status());
  return file;
}

absl::StatusOr<TokenFileLayout> TokenFileLayoutOf(const std::string& field, const std::string& path,
                                                  v1::TokenData::Format format,
                                                  const UntrustedFile& file) {
  // Its size as opened, not as found at a path a link may have been swapped into since.
  if (ResolveTokenFormat(path, format) == v1::TokenData::UINT16) {
    const uint64_t bytes = file.size();
    if (bytes % 2 != 0) {
      return TokenFileInvalid(
          field, path, absl::StrCat("has ", bytes, " bytes, not a whole number of uint16 ids"));
    }
    return TokenFileLayout{0, 2, static_cast<int64_t>(bytes / 2)};
  }
  auto index = ReadSafetensorsIndex(file, path);
  if (!index.ok()) return TokenFileReadFailure(field, path, index.status());
  auto it = index->tensors.find("tokens");
  // Ids are integers: a float tensor of 2 or 4 bytes an element would be read as ids.
  const bool integer =
      it != index->tensors.end() &&
      (it->second.dtype == "U16" || it->second.dtype == "I32" || it->second.dtype == "I64");
  if (!integer || it->second.shape.size() != 1) {
    return TokenFileInvalid(field, path, "needs a 1-D tensor 'tokens' of U16, I32 or I64");
  }
  return TokenFileLayout{it->second.begin, SafetensorsDtypeSize(it->second.dtype),
                         it->second.shape[0]};
}

absl::StatusOr<TokenFileLayout> InspectTokenFile(const std::string& field, const std::string& path,
                                                 v1::TokenData::Format format, Links links) {
  const absl::StatusOr<UntrustedFile> file = OpenTokenFile(field, path, links);
  if (!file.ok()) return file.status();
  return TokenFileLayoutOf(field, path, format, *file);
}

}  // namespace shardwise
