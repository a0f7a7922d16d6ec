// What tests/tokenizers/check.sh cannot compare with Hugging Face's JavaScript port, which
// lacks them or does them otherwise than its Rust library (the one transformers runs):
// Split's MergedWithPrevious, MergedWithNext and Contiguous and `invert`, a BPE model's
// continuing_subword_prefix, an added token's single_word. These follow the library's own
// rules and its documentation's examples. And what every file must be: a component not
// supported, or a malformed file, is refused naming its JSON path.

#include "tokenizer/huggingface/huggingface_tokenizer.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/pattern.h"

namespace shardwise {
namespace tokenizer {
namespace {

using Json = nlohmann::json;

std::vector<std::string> Split(const std::string& text, hf::SplitBehavior behavior,
                               bool invert = false) {
  return hf::SplitBy(hf::Pattern::Literal("-").Find(text), behavior, invert);
}

// The examples of the library's SplitDelimiterBehavior documentation.
TEST(HuggingFaceSplitTest, EachBehaviourCutsAsTheLibraryDocumentsIt) {
  const std::string text = "the-final--countdown";
  using B = hf::SplitBehavior;
  EXPECT_EQ(Split(text, B::kRemoved), (std::vector<std::string>{"the", "final", "countdown"}));
  EXPECT_EQ(Split(text, B::kIsolated),
            (std::vector<std::string>{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(Split(text, B::kMergedWithPrevious),
            (std::vector<std::string>{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(Split(text, B::kMergedWithNext),
            (std::vector<std::string>{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(Split(text, B::kContiguous),
            (std::vector<std::string>{"the", "-", "final", "--", "countdown"}));
  // Inverted, the words are the matches: removing them leaves the dashes.
  EXPECT_EQ(Split(text, B::kRemoved, /*invert=*/true), (std::vector<std::string>{"-", "-", "-"}));
}

// A tokenizer of `model` (a BPE's fields besides its type) and `rest` (other top-level keys).
absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> Make(Json model, Json rest = Json::object()) {
  model["type"] = "BPE";
  Json json = std::move(rest);
  json["model"] = model;
  return HuggingFaceTokenizer::FromJson(json.dump(), "test.json");
}

std::vector<int32_t> Encode(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  tokenizer.Encode(text, true, &ids);
  return ids;
}

// With a subword prefix, every character but a piece's first is looked up with it, and a
// merge's result drops its right token's prefix ("h" + "##e" -> "he").
TEST(HuggingFaceBpeTest, ASubwordPrefixMarksEachCharacterAfterThePiecesFirst) {
  auto tokenizer =
      Make({{"vocab", {{"h", 0}, {"##e", 1}, {"##y", 2}, {"he", 3}, {"hey", 4}}},
            {"merges", {"h ##e", "he ##y"}},
            {"continuing_subword_prefix", "##"}},
           {{"pre_tokenizer",
             {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "hey he"), (std::vector<int32_t>{4, 3}));
}

// Unknown characters become the unknown token, a run of them one with fuse_unk; with
// byte_fallback, their bytes' tokens where the vocabulary has them all.
TEST(HuggingFaceBpeTest, UnknownCharactersFuseOrFallBackToBytes) {
  Json vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  auto fused = Make(
      {{"vocab", vocab}, {"merges", Json::array()}, {"unk_token", "<unk>"}, {"fuse_unk", true}});
  ASSERT_TRUE(fused.ok()) << fused.status();
  EXPECT_EQ(Encode(**fused, "axyza"), (std::vector<int32_t>{1, 0, 1}));
  auto bytes = Make({{"vocab", vocab},
                     {"merges", Json::array()},
                     {"unk_token", "<unk>"},
                     {"byte_fallback", true}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(Encode(**bytes, "a\xC3\xA9x"), (std::vector<int32_t>{1, 2, 3, 0}));
}

// single_word: only where no word character touches the match.
TEST(HuggingFaceAddedTokensTest, ASingleWordTokenMatchesOnlyAWholeWord) {
  Json added = Json::array({{{"id", 9},
                             {"content", "word"},
                             {"single_word", true},
                             {"lstrip", false},
                             {"rstrip", false},
                             {"normalized", false},
                             {"special", false}}});
  Json vocab = {{"s", 0}, {"w", 1}, {"o", 2}, {"r", 3}, {"d", 4}, {"y", 5}, {" ", 6}};
  auto tokenizer = Make({{"vocab", vocab}, {"merges", Json::array()}}, {{"added_tokens", added}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "sword word wordy"),
            (std::vector<int32_t>{0, 1, 2, 3, 4, 6, 9, 6, 1, 2, 3, 4, 5}));
}

TEST(HuggingFaceTokenizerTest, WhatItDoesNotSupportIsRefusedNamingItsJsonPath) {
  const std::string model = R"("model": {"type": "BPE", "vocab": {"a": 0}, "merges": []})";
  struct Case {
    std::string json;
    std::string message;
  };
  const std::vector<Case> cases = {
      {R"({"model": {"type": "Unigram", "vocab": []}})",
       "model.type: a model of type \"Unigram\" is not supported"},
      {"{" + model + R"(, "normalizer": {"type": "BertNormalizer"}})",
       "normalizer: a normalizer of type \"BertNormalizer\" is not supported"},
      {"{" + model +
           R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits"},
              {"type": "Whitespace"}]}})",
       "pre_tokenizer.pretokenizers[1]: a pre_tokenizer of type \"Whitespace\""},
      {"{" + model + R"(, "decoder": {"type": "WordPiece"}})",
       "decoder: a decoder of type \"WordPiece\" is not supported"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})",
       "model.merges[0]: merges \"a\" and \"b\", whose tokens or result the vocabulary lacks"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})",
       "model.vocab[\"a\"]: is \"zero\", not an id"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})",
       "model.dropout: is 0.1"},
      {"{" + model + R"(, "added_tokens": [{"id": 1}]})", "added_tokens[0].content: is missing"},
  };
  for (const Case& c : cases) {
    auto refused = HuggingFaceTokenizer::FromJson(c.json, "test.json");
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_TRUE(absl::StrContains(refused.status().message(), c.message)) << refused.status();
  }
  EXPECT_TRUE(
      absl::StrContains(HuggingFaceTokenizer::FromJson("[1, 2", "broken.json").status().message(),
                        "broken.json: not a JSON object"));
  EXPECT_TRUE(absl::StrContains(
      HuggingFaceTokenizer::FromJson(std::string(1 << 20, '['), "deep.json").status().message(),
      "deep.json: nests deeper than 64 levels"));
}

TEST(HuggingFaceTokenizerTest, ATemplatesSpecialTokensGoAroundEachDocument) {
  const Json post = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}}},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {1}}}}, {"</s>", {{"id", "</s>"}, {"ids", {2}}}}}}};
  auto tokenizer =
      Make({{"vocab", {{"a", 0}}}, {"merges", Json::array()}}, {{"post_processor", post}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->DocumentPrefix(), (std::vector<int32_t>{1}));
  EXPECT_EQ((*tokenizer)->DocumentSuffix(), (std::vector<int32_t>{2}));
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
