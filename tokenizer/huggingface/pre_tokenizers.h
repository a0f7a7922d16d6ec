#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_PRE_TOKENIZERS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_PRE_TOKENIZERS_H_

// tokenizer.json's "pre_tokenizer", which cuts normalised text into the pieces the model
// encodes apart: ByteLevel (GPT-2's byte-to-character spelling, with or without its
// pre-split regex and prefix space), Split (a pattern and a SplitDelimiterBehavior,
// inverted or not), Metaspace (spaces as a replacement character, prepended always, first
// or never, and split before it), Digits (individually or in runs), Sequence. Others are
// refused naming their JSON path and type. Each carries its pieces' leads (piece.h) as
// the library aligns what it cuts and respells.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/piece.h"

namespace shardwise {
namespace tokenizer {
namespace hf {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Cuts (and may respell) each of `pieces`, in place.
  virtual void Apply(std::vector<Piece>* pieces) const = 0;
};

// The pre-tokenizer of `json` at `path`; nullptr for null (none: a segment is one piece).
absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(const nlohmann::json& json,
                                                                   const std::string& path);

// GPT-2's spelling of bytes as characters (ByteLevel), and back: nullopt for text that is
// not in it.
std::string ByteLevelSpelling(absl::string_view bytes);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_PRE_TOKENIZERS_H_
