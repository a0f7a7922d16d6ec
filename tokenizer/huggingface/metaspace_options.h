#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_METASPACE_OPTIONS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_METASPACE_OPTIONS_H_

// A Metaspace's options as the library reads them, for the pre-tokenizer and the decoder
// alike: `replacement` one character ("▁" if absent); `prepend_scheme` "always" (the
// default), "first" or "never", older files' `add_prefix_space: false` meaning "never",
// and refused beside a `prepend_scheme` other than "never" (the library refuses such a
// file: "add_prefix_space does not match declared prepend_scheme").

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace tokenizer {
namespace hf {

struct MetaspaceOptions {
  enum class Prepend { kAlways, kFirst, kNever };
  std::string replacement;
  Prepend prepend = Prepend::kAlways;
};

// INVALID_ARGUMENT naming the field at `path` that is wrong.
absl::StatusOr<MetaspaceOptions> ReadMetaspaceOptions(const nlohmann::json& json,
                                                      const std::string& path);

// json[key] where it is one character (a Rust char: one Unicode scalar value, as UTF-8),
// `fallback` where it is absent; INVALID_ARGUMENT naming path.key otherwise.
absl::StatusOr<std::string> OneCharacterField(const nlohmann::json& json, const char* key,
                                              const std::string& path,
                                              std::optional<std::string> fallback);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_METASPACE_OPTIONS_H_
