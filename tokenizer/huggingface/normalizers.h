#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_

// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Replace (a pattern and
// its replacement), Prepend (before a non-empty text), Strip (whitespace at either end) and
// Sequence of them. Others are refused naming their JSON path and type.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace tokenizer {
namespace hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` (valid UTF-8) normalised.
  virtual std::string Apply(std::string text) const = 0;
};

// The normalizer of `json` at `path`; nullptr for null (none).
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& json,
                                                               const std::string& path);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_
