#include "tokenizer/encodings.h"

#include "absl/strings/str_join.h"

namespace shardwise {
namespace tokenizer {
namespace {

// GPT-2's pattern (its encoder.py), possessive where that cannot change a match.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s+(?!\S)|\s+)";

// tiktoken's cl100k_base.
constexpr char kCl100kPattern[] =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)";

// tiktoken's o200k_base: words split at case changes, contractions kept on the word.
constexpr char kO200kPattern[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Meta's Llama 3 tokenizer (its tokenizer.model is a tiktoken rank file).
constexpr char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

const std::vector<Encoding>& Encodings() {
  static const auto* encodings = new std::vector<Encoding>{
      {"gpt2", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50257, {}, {50256}},
      {"r50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50257, {}, {50256}},
      {"p50k_base", kGpt2Pattern, {{"<|endoftext|>", 50256}}, 50281, {}, {50256}},
      {"cl100k_base",
       kCl100kPattern,
       {{"<|endoftext|>", 100257},
        {"<|fim_prefix|>", 100258},
        {"<|fim_middle|>", 100259},
        {"<|fim_suffix|>", 100260},
        {"<|endofprompt|>", 100276}},
       100277,
       {},
       {100257}},
      {"o200k_base",
       kO200kPattern,
       {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}},
       200019,
       {},
       {199999}},
      {"llama3",
       kLlama3Pattern,
       {{"<|begin_of_text|>", 128000},
        {"<|end_of_text|>", 128001},
        {"<|start_header_id|>", 128006},
        {"<|end_header_id|>", 128007},
        {"<|eot_id|>", 128009}},
       128256,  // 128,000 ranks and 256 special ids, most of them reserved
       {128000},
       {128001}},
  };
  return *encodings;
}

}  // namespace

const Encoding* FindEncoding(absl::string_view name) {
  for (const Encoding& encoding : Encodings()) {
    if (encoding.name == name) return &encoding;
  }
  return nullptr;
}

std::string EncodingNames() {
  std::vector<std::string> names;
  for (const Encoding& encoding : Encodings()) names.push_back(encoding.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace tokenizer
}  // namespace shardwise
