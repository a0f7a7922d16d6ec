#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_JSON_FIELDS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_JSON_FIELDS_H_

// Reading tokenizer.json's fields: every error names the field's JSON path
// ("tokenizer.json: pre_tokenizer.pretokenizers[1].add_prefix_space: ...") and shows the
// value as given, cut and escaped. A key left out takes the library's default; a key of
// the wrong type is refused, never read as another value.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/json_depth.h"
#include "common/printable_text.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_pair_encoder.h"

// ASSIGN_OR_RETURN for the tokenizer's code, which links no gRPC (common/status_macros.h
// comes with it): `lhs` is declared or assigned from `expr`'s value, or its error returned.
#define HF_CONCAT_INNER(a, b) a##b
#define HF_CONCAT(a, b) HF_CONCAT_INNER(a, b)
#define HF_ASSIGN_OR_RETURN(lhs, expr) \
  HF_ASSIGN_OR_RETURN_IMPL(HF_CONCAT(hf_status_or_, __LINE__), lhs, expr)
#define HF_ASSIGN_OR_RETURN_IMPL(name, lhs, expr) \
  auto name = (expr);                             \
  if (!name.ok()) return name.status();           \
  lhs = std::move(*name)

#define HF_RETURN_IF_ERROR(expr)           \
  do {                                     \
    absl::Status hf_status = (expr);       \
    if (!hf_status.ok()) return hf_status; \
  } while (false)

namespace shardwise {
namespace tokenizer {
namespace hf {

inline absl::Status JsonError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", path, ": ", what));
}

inline std::string ShownJson(const nlohmann::json& json) { return ShownValue(json.dump()); }

// Hugging Face's files nest a few levels; parsed, each level costs memory, so deeper ones
// are refused unparsed (INVALID_ARGUMENT naming the file `name`).
inline absl::Status CheckJsonNesting(absl::string_view text, const std::string& name) {
  constexpr int kMaxDepth = 64;
  if (JsonNestingDepth(text, kMaxDepth) > kMaxDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": nests deeper than ", kMaxDepth, " levels"));
  }
  return absl::OkStatus();
}

// `text` parsed as one JSON object, or an error naming the file `name`.
inline absl::StatusOr<nlohmann::json> ParseJsonObject(absl::string_view text,
                                                      const std::string& name) {
  HF_RETURN_IF_ERROR(CheckJsonNesting(text, name));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": not a JSON object"));
  }
  return json;
}

// json[key] where it is present and not null, else nullptr.
inline const nlohmann::json* Field(const nlohmann::json& json, const char* key) {
  if (!json.is_object()) return nullptr;
  const auto it = json.find(key);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

inline absl::StatusOr<std::string> StringField(const nlohmann::json& json, const char* key,
                                               const std::string& path,
                                               std::optional<std::string> fallback) {
  const nlohmann::json* field = Field(json, key);
  if (field == nullptr) {
    if (fallback.has_value()) return *fallback;
    return JsonError(absl::StrCat(path, ".", key), "is missing");
  }
  if (!field->is_string()) {
    return JsonError(absl::StrCat(path, ".", key),
                     absl::StrCat("is ", ShownJson(*field), ", not a string"));
  }
  return field->get<std::string>();
}

inline absl::StatusOr<bool> BoolField(const nlohmann::json& json, const char* key,
                                      const std::string& path, bool fallback) {
  const nlohmann::json* field = Field(json, key);
  if (field == nullptr) return fallback;
  if (!field->is_boolean()) {
    return JsonError(absl::StrCat(path, ".", key),
                     absl::StrCat("is ", ShownJson(*field), ", not true or false"));
  }
  return field->get<bool>();
}

// json[key], which must be there and be true or false (as a field the library reads
// without a default: it refuses the file without it).
inline absl::StatusOr<bool> RequiredBoolField(const nlohmann::json& json, const char* key,
                                              const std::string& path) {
  if (!json.is_object() || !json.contains(key)) {
    return JsonError(absl::StrCat(path, ".", key), "is missing");
  }
  const nlohmann::json& field = json.at(key);
  if (!field.is_boolean()) {
    return JsonError(absl::StrCat(path, ".", key),
                     absl::StrCat("is ", ShownJson(field), ", not true or false"));
  }
  return field.get<bool>();
}

// `value` where it is an integer in 0..`max`, else nullopt: for loops over a vocabulary's
// hundreds of thousands of ids, which make the error (BoundedInt's) only for a bad one.
inline std::optional<int32_t> IntIn(const nlohmann::json& value, int32_t max) {
  if (value.is_number_unsigned() && value.get<uint64_t>() <= static_cast<uint64_t>(max)) {
    return static_cast<int32_t>(value.get<uint64_t>());
  }
  if (value.is_number_integer() && !value.is_number_unsigned() && value.get<int64_t>() >= 0 &&
      value.get<int64_t>() <= max) {
    return static_cast<int32_t>(value.get<int64_t>());
  }
  return std::nullopt;
}

// An integer in 0..`max`.
inline absl::StatusOr<int32_t> BoundedInt(const nlohmann::json& value, const std::string& path,
                                          int32_t max, const char* what) {
  if (const std::optional<int32_t> number = IntIn(value, max)) return *number;
  return JsonError(path, absl::StrCat("is ", ShownJson(value), ", not ", what, " in 0..", max));
}

// A token id: at most kMaxTokenId, as every vocabulary file's (the model's tables are
// indexed by id: one id of 2,000,000,000 would size them at 64 GB).
inline absl::StatusOr<int32_t> IdValue(const nlohmann::json& value, const std::string& path) {
  return BoundedInt(value, path, kMaxTokenId, "an id");
}

// A count (of repeats, of characters): a non-negative integer that fits int32_t.
inline absl::StatusOr<int32_t> CountValue(const nlohmann::json& value, const std::string& path) {
  return BoundedInt(value, path, INT32_MAX, "a count");
}

// The component's "type", for the factories' dispatch.
inline absl::StatusOr<std::string> TypeOf(const nlohmann::json& json, const std::string& path) {
  if (!json.is_object()) {
    return JsonError(path, absl::StrCat("is ", ShownJson(json), ", not an object"));
  }
  return StringField(json, "type", path, std::nullopt);
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_JSON_FIELDS_H_
