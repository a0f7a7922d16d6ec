// Encoding arbitrary bytes with every kind of tokenizer: byte-level BPE under each
// encoding's pre-split pattern (a small vocabulary: every byte and a few merges), and
// SentencePiece BPE and unigram models trained once, at start, on a fixed text. The first
// byte picks the tokenizer and whether the text starts a document. Every id must lie in
// the vocabulary, and the ids must decode to the text: any bytes for byte-level BPE;
// valid UTF-8 without U+2581 for SentencePiece (it decodes U+2581, its escaped space, as a
// space, and encodes an invalid byte as U+FFFD).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "tests/fuzz/fuzz_support.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/encodings.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/utf8.h"

namespace shardwise::fuzz {
namespace {

using tokenizer::Tokenizer;

// The tokenizers are made once, before any input: a failure there is the target's own.
void Require(const absl::Status& status) {
  if (status.ok()) return;
  std::fprintf(stderr, "tokenizer_fuzzer: %s\n", status.ToString().c_str());
  std::abort();
}

struct Fuzzed {
  std::unique_ptr<Tokenizer> tokenizer;
  bool any_bytes_round_trip;
};

std::string SmallTiktoken() {
  std::string ranks;
  int32_t rank = 0;
  for (int byte = 0; byte < 256; ++byte) {
    ranks += absl::Base64Escape(std::string(1, static_cast<char>(byte))) + " " +
             std::to_string(rank++) + "\n";
  }
  for (const char* merge : {" t", "he", " the", "in", "er", "ing", "\n\n", "  ", "12", "é"}) {
    ranks += absl::Base64Escape(merge) + " " + std::to_string(rank++) + "\n";
  }
  return WriteScratch("small.tiktoken", reinterpret_cast<const uint8_t*>(ranks.data()),
                      ranks.size());
}

// Lines of words made of a few syllables (a fixed sequence), so that training finds
// merges beyond the characters and the 256 byte pieces.
std::string TrainingText() {
  const char* syllables[] = {"the", "qu", "ick", "br", "own", "fo", "x", "ju", "mps",  "ov",
                             "er",  "la", "zy",  "do", "g",   "na", "ï", "ve", "café", "東京"};
  std::string text;
  uint32_t state = 1;
  for (int line = 0; line < 400; ++line) {
    for (int word = 0; word < 12; ++word) {
      for (int part = 0; part < 3; ++part) {
        state = state * 1664525u + 1013904223u;
        text += syllables[(state >> 16) % 20];
      }
      text += word == 11 ? "\n" : " ";
    }
  }
  return WriteScratch("train.txt", reinterpret_cast<const uint8_t*>(text.data()), text.size());
}

std::unique_ptr<Tokenizer> TrainedSentencePiece(const std::string& model_type) {
  tokenizer::SentencePieceTraining training;
  training.model_type = model_type;
  training.vocab_size = 300;
  training.byte_fallback = "true";
  auto model = tokenizer::TrainSentencePiece(training, {TrainingText()});
  Require(model.status());
  auto loaded = tokenizer::SentencePieceTokenizer::FromSerialized(*model, model_type);
  Require(loaded.status());
  return std::move(*loaded);
}

const std::vector<Fuzzed>& Tokenizers() {
  static const auto* tokenizers = [] {
    auto* all = new std::vector<Fuzzed>;
    const std::string ranks = SmallTiktoken();
    for (const char* encoding : {"gpt2", "cl100k_base", "o200k_base", "llama3"}) {
      auto bpe = tokenizer::ByteLevelBpe::FromTiktoken(ranks, encoding);
      Require(bpe.status());
      all->push_back({std::move(*bpe), true});
    }
    all->push_back({TrainedSentencePiece("bpe"), false});
    all->push_back({TrainedSentencePiece("unigram"), false});
    return all;
  }();
  return *tokenizers;
}

bool SentencePieceRoundTrips(std::string_view text) {
  return tokenizer::ValidUtf8Prefix(absl::string_view(text.data(), text.size())) == text.size() &&
         text.find("\xE2\x96\x81") == std::string_view::npos;
}

}  // namespace
}  // namespace shardwise::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise::fuzz;
  if (size == 0) return 0;
  const std::vector<Fuzzed>& tokenizers = Tokenizers();
  const Fuzzed& fuzzed = tokenizers[(data[0] >> 1) % tokenizers.size()];
  const bool document_start = data[0] & 1;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  std::vector<int32_t> ids;
  fuzzed.tokenizer->Encode(text, document_start, &ids);
  for (int32_t id : ids) {
    if (id < 0 || id >= fuzzed.tokenizer->vocab_size()) __builtin_trap();
  }
  if (fuzzed.any_bytes_round_trip || (document_start && SentencePieceRoundTrips(text))) {
    if (fuzzed.tokenizer->Decode(ids) != text) __builtin_trap();
  }
  return 0;
}
