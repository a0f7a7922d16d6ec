#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_

// tokenizer.json's "normalizer": NFC, NFD, NFKC, NFKD, Lowercase, Replace (a pattern and
// its replacement), Prepend (before a non-empty text), Strip (whitespace at either end) and
// Sequence of them. Others are refused naming their JSON path and type. Each carries a
// text's lead (piece.h) as the library aligns what it makes.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/piece.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` (valid UTF-8) normalised, its lead carried. `stretch_begins_input`: whether
  // the stretch it was (before any normalizer) begins the input; the library aligns text
  // inserted before everything with the stretch's start.
  virtual void Apply(Piece* text, bool stretch_begins_input) const = 0;

  // `text` normalised, where no lead is asked for.
  std::string Normalized(std::string text) const;
};

// The normalizer of `json` at `path`; nullptr for null (none).
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(const nlohmann::json& json,
                                                               const std::string& path);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_NORMALIZERS_H_
