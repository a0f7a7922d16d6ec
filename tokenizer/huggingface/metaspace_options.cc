#include "tokenizer/huggingface/metaspace_options.h"

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"
#include "tokenizer/huggingface/json_fields.h"
#include "tokenizer/utf8.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

absl::StatusOr<std::string> OneCharacterField(const nlohmann::json& json, const char* key,
                                              const std::string& path,
                                              std::optional<std::string> fallback) {
  HF_ASSIGN_OR_RETURN(std::string value, StringField(json, key, path, std::move(fallback)));
  if (value.empty() || ValidUtf8Prefix(value) != value.size() ||
      Utf8CharLength(value) != value.size()) {
    return JsonError(absl::StrCat(path, ".", key),
                     absl::StrCat("is \"", ShownValue(value), "\", not one character"));
  }
  return value;
}

absl::StatusOr<MetaspaceOptions> ReadMetaspaceOptions(const nlohmann::json& json,
                                                      const std::string& path) {
  MetaspaceOptions options;
  HF_ASSIGN_OR_RETURN(options.replacement,
                      OneCharacterField(json, "replacement", path, "\xE2\x96\x81"));
  HF_ASSIGN_OR_RETURN(const bool add_prefix_space, BoolField(json, "add_prefix_space", path, true));
  const bool scheme_given = Field(json, "prepend_scheme") != nullptr;
  HF_ASSIGN_OR_RETURN(const std::string scheme,
                      StringField(json, "prepend_scheme", path, "always"));
  if (scheme == "always") {
    options.prepend = MetaspaceOptions::Prepend::kAlways;
  } else if (scheme == "first") {
    options.prepend = MetaspaceOptions::Prepend::kFirst;
  } else if (scheme == "never") {
    options.prepend = MetaspaceOptions::Prepend::kNever;
  } else {
    return JsonError(path + ".prepend_scheme",
                     absl::StrCat("is \"", ShownValue(scheme), "\", not always, first or never"));
  }
  if (!add_prefix_space) {
    // An older file's add_prefix_space alone stands for "never"; beside another scheme, the
    // file contradicts itself.
    if (scheme_given && options.prepend != MetaspaceOptions::Prepend::kNever) {
      return JsonError(
          path + ".prepend_scheme",
          absl::StrCat("is \"", scheme, "\" where add_prefix_space is false: the two disagree"));
    }
    options.prepend = MetaspaceOptions::Prepend::kNever;
  }
  return options;
}

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
