#ifndef SHARDWISE_TOKENIZER_ENCODINGS_H_
#define SHARDWISE_TOKENIZER_ENCODINGS_H_

// The byte-level BPE encodings Shardwise knows: each one's pre-split pattern, special
// tokens and what goes around a document. The vocabularies themselves are files the user
// names (GPT-2's encoder.json + vocab.bpe, or a .tiktoken rank file).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardwise {
namespace tokenizer {

struct SpecialToken {
  std::string text;
  int32_t id;
};

struct Encoding {
  std::string name;
  std::string pattern;  // PCRE2 syntax
  std::vector<SpecialToken> specials;
  int64_t vocab_size;  // the published one, specials included
  std::vector<int32_t> before_document, after_document;
};

// gpt2 (= r50k_base), p50k_base, cl100k_base, o200k_base, llama3; nullptr for another name.
const Encoding* FindEncoding(absl::string_view name);

// The names FindEncoding knows, for messages.
std::string EncodingNames();

}  // namespace tokenizer
}  // namespace shardwise

#endif  // SHARDWISE_TOKENIZER_ENCODINGS_H_
