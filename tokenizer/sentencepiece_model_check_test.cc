// The check of a SentencePiece model's normaliser against models SentencePiece itself
// trains (with NFKC's rules, whose charsmap is a real darts-clone trie), corrupted: every
// corruption is refused or leaves a model the library encodes with, never one that kills
// the process. A check that let a bad trie through would crash this test.

#include "tokenizer/sentencepiece_model_check.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tokenizer/sentencepiece_api.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace shardwise {
namespace tokenizer {
namespace {

// A model trained on a license text with NFKC's normalisation rules.
const std::string& NfkcModel() {
  static const std::string* model = [] {
    auto* serialized = new std::string;
    const std::string error = spm::Train({{"model_type", "bpe"},
                                          {"vocab_size", "400"},
                                          {"character_coverage", "1.0"},
                                          {"normalization_rule_name", "nmt_nfkc"},
                                          {"minloglevel", "2"}},
                                         {"/usr/share/common-licenses/GPL-3"}, serialized);
    EXPECT_EQ(error, "");
    return serialized;
  }();
  return *model;
}

// Text that walks the trie in many places: NFKC folds full-width forms, ligatures,
// compatibility digits and more.
const std::string kText =
    "\xEF\xBC\xA1\xEF\xBC\xA2 \xEF\xAC\x81 \xE2\x91\xA0 \xE2\x84\xAB caf\xC3\xA9 "
    "\xE3\x8D\xBB \xE2\x80\x8B The Program \xEF\xBD\xB6\xEF\xBE\x9E 123";

uint32_t Unit(const std::string& model, size_t at) {
  uint32_t unit;
  std::memcpy(&unit, model.data() + at, 4);
  return unit;
}

// Byte offset of the charsmap's trie (after its 4-byte size) inside `model`, and its
// number of units.
void TrieOf(const std::string& model, size_t* trie_at, size_t* units) {
  const absl::string_view charsmap = FindNormalizerCharsmap(model);
  ASSERT_GT(charsmap.size(), 4u) << "the model has no charsmap";
  uint32_t trie_size;
  std::memcpy(&trie_size, charsmap.data(), 4);
  *trie_at = static_cast<size_t>(charsmap.data() - model.data()) + 4;
  *units = trie_size / 4;
}

TEST(SentencePieceModelCheckTest, AModelSentencePieceTrainedPasses) {
  const std::string& model = NfkcModel();
  EXPECT_TRUE(CheckSentencePieceModel(model, "nfkc.model").ok());
  auto tokenizer = SentencePieceTokenizer::FromSerialized(model, "nfkc.model");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::vector<int32_t> ids;
  (*tokenizer)->Encode(kText, true, &ids);
  EXPECT_FALSE(ids.empty());
}

TEST(SentencePieceModelCheckTest, ARootThatLeadsOutOfTheArrayIsRefused) {
  std::string model = NfkcModel();
  size_t trie_at = 0, units = 0;
  TrieOf(model, &trie_at, &units);
  const uint32_t far = 0x7FFFFC00u;  // an offset far past any array
  std::memcpy(model.data() + trie_at, &far, 4);
  const absl::Status status = CheckSentencePieceModel(model, "bad.model");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "bad.model: its normalizer_spec.precompiled_charsmap is corrupt"))
      << status;
  EXPECT_EQ(SentencePieceTokenizer::FromSerialized(model, "bad.model").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SentencePieceModelCheckTest, ABrokenEncodingOrSizeIsRefused) {
  const std::string& model = NfkcModel();
  EXPECT_FALSE(CheckSentencePieceModel(model.substr(0, model.size() / 2), "cut.model").ok());
  EXPECT_FALSE(CheckPrecompiledCharsmap(std::string("\xFF\xFF\xFF\x7F"
                                                    "abc",
                                                    7))
                   .ok());
  EXPECT_FALSE(CheckPrecompiledCharsmap("ab").ok());
}

// Random corruptions of the trie's units: each is refused, or the library encodes with the
// model without crashing (the process would die here if the check let a bad one through).
TEST(SentencePieceModelCheckTest, EveryCorruptionIsRefusedOrHarmless) {
  const std::string& original = NfkcModel();
  size_t trie_at = 0, units = 0;
  TrieOf(original, &trie_at, &units);
  std::mt19937 random(7);
  int refused = 0, harmless = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string model = original;
    const size_t unit = trial < 32 ? trial : random() % units;
    uint32_t bits = Unit(model, trie_at + 4 * unit) ^ (1u << (random() % 32));
    if (trial % 3 == 0) bits = static_cast<uint32_t>(random());
    std::memcpy(model.data() + trie_at + 4 * unit, &bits, 4);
    if (!CheckSentencePieceModel(model, "corrupt.model").ok()) {
      ++refused;
      continue;
    }
    auto tokenizer = SentencePieceTokenizer::FromSerialized(model, "corrupt.model");
    if (!tokenizer.ok()) continue;
    std::vector<int32_t> ids;
    (*tokenizer)->Encode(kText, true, &ids);
    ++harmless;
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(harmless, 0);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
