#include "tokenizer/byte_tokenizer.h"

#include "absl/strings/str_cat.h"

namespace shardwise {
namespace tokenizer {

std::string ByteTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string text;
  for (int32_t id : ids) {
    if (id >= 0 && id < kByteVocabulary) {
      text.push_back(static_cast<char>(id));
    } else {
      absl::StrAppend(&text, "<", id, ">");
    }
  }
  return text;
}

}  // namespace tokenizer
}  // namespace shardwise
