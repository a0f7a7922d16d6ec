// The tokenizer's file readers over arbitrary bytes: a tokenizer folder's manifest, a
// tiktoken rank file, GPT-2's encoder.json with vocab.bpe, a Hugging Face tokenizer.json
// (with its tokenizer_config.json), and a SentencePiece model (a
// model SentencePiece trained at start with NFKC's rules, patched at places the input
// picks, so that the normaliser's trie, which the library walks unchecked, is what
// changes). The first byte picks the reader. Whatever a reader accepts must encode and
// decode a text without crashing: a SentencePiece model that passes the check and then
// crashes the library is the bug this target looks for.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_support.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/huggingface/huggingface_tokenizer.h"
#include "tokenizer/manifest.h"
#include "tokenizer/sentencepiece_api.h"
#include "tokenizer/sentencepiece_model_check.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/transformers_config.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise::fuzz {
namespace {

// Full-width forms, ligatures and compatibility digits: NFKC's trie is walked everywhere.
constexpr char kText[] =
    "\xEF\xBC\xA1\xEF\xBC\xA2 \xEF\xAC\x81 \xE2\x91\xA0 caf\xC3\xA9 \xE3\x8D\xBB The 123 "
    "\xF0\x9F\x99\x82\n";

const std::string& NfkcModel() {
  static const std::string* model = [] {
    // Words enough for 280 pieces: every pair of a few syllables.
    const char* syllables[] = {"the", "qu", "ick", "br", "own", "fo",          "ju", "mps", "ov",
                               "la",  "zy", "do",  "na", "ve",  "caf\xC3\xA9", "ko", "ri",  "su"};
    std::string text;
    for (const char* first : syllables) {
      for (const char* second : syllables) text += std::string(first) + second + " ";
      text += "\n";
    }
    const std::string path =
        WriteScratch("nfkc.txt", reinterpret_cast<const uint8_t*>(text.data()), text.size());
    auto* serialized = new std::string;
    const std::string error = tokenizer::spm::Train({{"model_type", "bpe"},
                                                     {"vocab_size", "280"},
                                                     {"character_coverage", "1.0"},
                                                     {"normalization_rule_name", "nmt_nfkc"},
                                                     {"minloglevel", "2"}},
                                                    {path}, serialized);
    if (!error.empty()) {
      std::fprintf(stderr, "tokenizer_files_fuzzer: %s\n", error.c_str());
      std::abort();
    }
    return serialized;
  }();
  return *model;
}

void EncodeAndDecode(const tokenizer::Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  tokenizer.Encode(kText, true, &ids);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) __builtin_trap();  // an id past the vocabulary
  }
  (void)tokenizer.Decode(ids);
}

void Manifest(absl::string_view bytes) {
  static const std::string dir = [] {
    std::string folder = ScratchDir() + "/manifest";
    std::filesystem::create_directories(folder);
    return folder;
  }();
  WriteScratch("manifest/shardwise-tokenizer.json", reinterpret_cast<const uint8_t*>(bytes.data()),
               bytes.size());
  (void)tokenizer::CheckTokenizerFolder(dir);
}

void Tiktoken(absl::string_view bytes) {
  auto tokens = tokenizer::ParseTiktoken("fuzz.tiktoken", bytes);
  if (!tokens.ok()) return;
  auto bpe = tokenizer::ByteLevelBpe::FromTiktokenRanks(*tokens, "fuzz.tiktoken", "gpt2");
  if (bpe.ok()) EncodeAndDecode(**bpe);
}

void Gpt2(absl::string_view bytes) {
  const size_t split = bytes.find('\0');
  if (split == absl::string_view::npos) return;
  auto vocabulary = tokenizer::ParseGpt2Files("encoder.json", bytes.substr(0, split), "vocab.bpe",
                                              bytes.substr(split + 1));
  if (!vocabulary.ok()) return;
  auto bpe = tokenizer::ByteLevelBpe::FromGpt2Vocabulary(*vocabulary, "encoder.json");
  if (bpe.ok()) EncodeAndDecode(**bpe);
}

// Patches of 5 bytes: a 4-byte offset into the charsmap (modulo its size), a byte.
void SentencePiece(absl::string_view patches) {
  std::string model = NfkcModel();
  const absl::string_view charsmap = tokenizer::FindNormalizerCharsmap(model);
  const size_t at = static_cast<size_t>(charsmap.data() - model.data());
  for (size_t i = 0; i + 5 <= patches.size(); i += 5) {
    uint32_t offset;
    std::memcpy(&offset, patches.data() + i, 4);
    model[at + offset % charsmap.size()] = patches[i + 4];
  }
  if (!tokenizer::CheckSentencePieceModel(model, "fuzz.model").ok()) return;
  auto loaded = tokenizer::SentencePieceTokenizer::FromSerialized(model, "fuzz.model");
  if (loaded.ok()) EncodeAndDecode(**loaded);
}

// A tokenizer.json, and after a NUL the tokenizer_config.json that goes with it.
void HuggingFace(absl::string_view bytes) {
  const size_t split = bytes.find('\0');
  auto tokenizer = tokenizer::HuggingFaceTokenizer::FromJson(bytes.substr(0, split), "fuzz.json");
  if (!tokenizer.ok()) return;
  EncodeAndDecode(**tokenizer);
  if (split == absl::string_view::npos) {
    (void)tokenizer::MakeTransformersConfig("huggingface", **tokenizer, nullptr);
    return;
  }
  const tokenizer::UserConfig config{"tokenizer_config.json", std::string(bytes.substr(split + 1))};
  (void)tokenizer::MakeTransformersConfig("huggingface", **tokenizer, &config);
}

}  // namespace
}  // namespace shardwise::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise::fuzz;
  if (size == 0) return 0;
  const absl::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0:
      Manifest(rest);
      break;
    case 1:
      Tiktoken(rest);
      break;
    case 2:
      Gpt2(rest);
      break;
    case 3:
      SentencePiece(rest);
      break;
    default:
      HuggingFace(rest);
      break;
  }
  return 0;
}
