#ifndef SHARDWISE_TOKENIZER_HUGGINGFACE_DECODERS_H_
#define SHARDWISE_TOKENIZER_HUGGINGFACE_DECODERS_H_

// tokenizer.json's "decoder", from tokens back to text, as the library's decode_chain: each
// decoder maps the list of token strings to another, and the last list is joined.
// ByteLevel (GPT-2's characters back to bytes, then UTF-8 with replacement), Metaspace,
// ByteFallback ("<0xAB>" tokens back to bytes), Fuse, Strip, Replace, Sequence. Others are
// refused naming their JSON path and type.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace tokenizer {
namespace hf {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const = 0;
};

// The decoder of `json` at `path`; nullptr for null (tokens are joined with spaces).
absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(const nlohmann::json& json,
                                                         const std::string& path);

}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_HUGGINGFACE_DECODERS_H_
