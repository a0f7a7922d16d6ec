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
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/huggingface/pattern.h"
#include "tokenizer/huggingface/unicode_text.h"

namespace shardwise {
namespace tokenizer {
namespace {

using Json = nlohmann::json;

std::vector<std::string> Texts(const std::vector<absl::string_view>& views) {
  return std::vector<std::string>(views.begin(), views.end());
}

std::vector<std::string> Split(const std::string& text, hf::SplitBehavior behavior,
                               bool invert = false) {
  return Texts(hf::SplitBy(hf::Pattern::Literal("-").Find(text), behavior, invert));
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

// A pattern that can match the empty string matches it where Rust's regex and Oniguruma
// do (the library's patterns): an empty match leaves the character there to the text
// after it, and none is taken where the previous match ended.
TEST(HuggingFacePatternTest, AnEmptyMatchTakesNoCharacter) {
  auto start = hf::Pattern::FromJson(Json{{"Regex", "^"}}, "pattern");
  ASSERT_TRUE(start.ok()) << start.status();
  EXPECT_EQ(start->Replace("Hello", "_"), "_Hello");
  EXPECT_EQ(start->Replace("", "_"), "");  // nothing to match in: nothing put there
  auto spaces = hf::Pattern::FromJson(Json{{"Regex", "\\s*"}}, "pattern");
  ASSERT_TRUE(spaces.ok()) << spaces.status();
  EXPECT_EQ(
      Texts(hf::SplitBy(spaces->Find("ab cd"), hf::SplitBehavior::kRemoved, /*invert=*/false)),
      (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(spaces->Replace("ab cd", "-"), "-a-b-c-d-");  // Rust's replace_all (not Python's)
  // Oniguruma's anchors are a line's: "^" after each newline, "$" before each.
  EXPECT_EQ(start->Replace("a\nb", "_"), "_a\n_b");
  auto end = hf::Pattern::FromJson(Json{{"Regex", "$"}}, "pattern");
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_EQ(end->Replace("a\nb", "_"), "a_\nb_");
}

// A tokenizer of `model` (a BPE's fields besides its type) and `rest` (other top-level keys).
absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> Make(Json model, Json rest = Json::object()) {
  model["type"] = "BPE";
  Json json = std::move(rest);
  json["model"] = model;
  return HuggingFaceTokenizer::FromJson(json.dump(), "test.json");
}

// An "added_tokens" entry with every flag false.
Json AddedEntry(int id, const std::string& content) {
  return Json{{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
              {"rstrip", false}, {"normalized", false}, {"special", false}};
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

// Metaspace's "first" prepends to a piece whose offset in the input is 0 (the library's
// `offsets_original().0 == 0`), not to whichever piece comes first: a Split before it
// that removed the text's first characters leaves no piece there.
TEST(HuggingFaceMetaspaceTest, FirstPrependsOnlyAtTheInputsFirstByte) {
  auto tokenizer =
      Make({{"vocab", {{"a", 0}, {"b", 1}, {"\u2581", 2}, {"\u2581a", 3}, {"<unk>", 4}}},
            {"merges", {"\u2581 a"}},
            {"unk_token", "<unk>"}},
           {{"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Removed"}},
                {{"type", "Metaspace"},
                 {"replacement", "\u2581"},
                 {"prepend_scheme", "first"},
                 {"split", true}}}}}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "a-a"), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(Encode(**tokenizer, "-a-a"), (std::vector<int32_t>{0, 0}));
  EXPECT_EQ(Encode(**tokenizer, "--a b"), (std::vector<int32_t>{0, 2, 1}));
}

// A tokenizer with `normalizer` and Metaspace "first" (split), whose vocabulary has "a",
// "c", "x" and U+0301, each also after "▁".
absl::StatusOr<std::unique_ptr<HuggingFaceTokenizer>> FirstAfter(
    const Json& normalizer, const Json& pre_tokenizer = nullptr) {
  const Json metaspace = {{"type", "Metaspace"},
                          {"replacement", "\u2581"},
                          {"prepend_scheme", "first"},
                          {"split", true}};
  Json steps = Json::array();
  if (!pre_tokenizer.is_null()) steps.push_back(pre_tokenizer);
  steps.push_back(metaspace);
  return Make({{"vocab",
                {{"a", 0},
                 {"c", 1},
                 {"x", 2},
                 {"\u0301", 3},
                 {"\u2581", 4},
                 {"\u2581a", 5},
                 {"\u2581c", 6},
                 {"\u2581x", 7},
                 {"\u2581\u0301", 8},
                 {"<unk>", 9}}},
               {"merges", {"\u2581 a", "\u2581 c", "\u2581 x", "\u2581 \u0301"}},
               {"unk_token", "<unk>"}},
              {{"normalizer", normalizer},
               {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", steps}}}});
}

// The library cuts every normalised stretch (where no added token is, into one piece) and
// gives a piece the offset its first byte is aligned with: "first" asks whether the
// normalizer kept the input's first character at the piece's start. A Strip that removed
// it, or a Replace whose match began there and ran on, moves the start; a Replace of one
// character, a Prepend, or a normal form that keeps the character (decomposed) does not.
TEST(HuggingFaceMetaspaceTest, FirstAsksWhereTheNormalizerAlignedThePiecesFirstByte) {
  auto stripped = FirstAfter({{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}});
  ASSERT_TRUE(stripped.ok()) << stripped.status();
  EXPECT_EQ(Encode(**stripped, "a"), (std::vector<int32_t>{5}));
  EXPECT_EQ(Encode(**stripped, "  a"), (std::vector<int32_t>{0}));

  auto replaced =
      FirstAfter({{"type", "Replace"}, {"pattern", {{"Regex", "a+"}}}, {"content", "c"}});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(Encode(**replaced, "ax"), (std::vector<int32_t>{6, 2}));   // aligned with "a"
  EXPECT_EQ(Encode(**replaced, "aax"), (std::vector<int32_t>{1, 2}));  // with the second "a"

  // Inserted before everything, a Replace's content is aligned with the stretch's start.
  auto inserted =
      FirstAfter({{"type", "Sequence"},
                  {"normalizers",
                   {{{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}},
                    {{"type", "Replace"}, {"pattern", {{"Regex", "^"}}}, {"content", "c"}}}}});
  ASSERT_TRUE(inserted.ok()) << inserted.status();
  EXPECT_EQ(Encode(**inserted, "  a"), (std::vector<int32_t>{6, 0}));

  // NFD keeps U+0301 aligned with "é": removing the "e" leaves the mark at offset 0.
  auto decomposed =
      FirstAfter({{"type", "Sequence"},
                  {"normalizers",
                   {{{"type", "NFD"}},
                    {{"type", "Replace"}, {"pattern", {{"String", "e"}}}, {"content", ""}}}}});
  ASSERT_TRUE(decomposed.ok()) << decomposed.status();
  EXPECT_EQ(Encode(**decomposed, "\u00e9a"), (std::vector<int32_t>{8, 0}));
  EXPECT_EQ(Encode(**decomposed, "ea"), (std::vector<int32_t>{0}));

  // A Prepend's text is aligned with the first character: a Split after it that cuts the
  // two apart leaves both pieces at offset 0, and "first" prepends to each.
  auto prepended =
      FirstAfter({{"type", "Prepend"}, {"prepend", "x"}},
                 {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Isolated"}});
  ASSERT_TRUE(prepended.ok()) << prepended.status();
  EXPECT_EQ(Encode(**prepended, "a"), (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(Encode(**prepended, "ca"), (std::vector<int32_t>{7, 6, 0}));
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

// A merge listed twice takes its later rank, as the library's map of merges does: here
// "a b" (rank 2) comes after "b c" (rank 1), so "abc" merges "b c" first.
TEST(HuggingFaceBpeTest, AMergeListedTwiceTakesItsLaterRank) {
  auto tokenizer = Make({{"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}}},
                         {"merges", {"a b", "b c", "a b"}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "abc"), (std::vector<int32_t>{0, 4}));
}

// merges.txt's "#version" header, kept by files converted from one, is dropped without
// a rank, as the library drops it: "b c" keeps rank 0 and merges before "a b".
TEST(HuggingFaceBpeTest, AVersionHeaderAmongTheMergesIsSkipped) {
  auto tokenizer = Make({{"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}}},
                         {"merges", {"#version: 0.2", "b c", "a b"}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "abc"), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(Encode(**tokenizer, "ab"), (std::vector<int32_t>{3}));
}

// single_word: only where no word character touches the match.
TEST(HuggingFaceAddedTokensTest, ASingleWordTokenMatchesOnlyAWholeWord) {
  Json added = Json::array({{{"id", 7},
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
            (std::vector<int32_t>{0, 1, 2, 3, 4, 6, 7, 6, 1, 2, 3, 4, 5}));
}

// A `normalized` token is matched in its normalised form, in the normalised text, as the
// library's AddedVocabulary does: with Lowercase, "Hello" matches "HELLO"; with a Prepend
// of "_", "<x>" is matched as "_<x>", so inside a stretch it is not matched at all.
TEST(HuggingFaceAddedTokensTest, ANormalizedTokenIsMatchedInItsNormalizedForm) {
  const auto token = [](const std::string& content) {
    return Json{{"id", 8},         {"content", content}, {"single_word", false}, {"lstrip", false},
                {"rstrip", false}, {"normalized", true}, {"special", false}};
  };
  Json vocab = {{"h", 0}, {"e", 1}, {"l", 2}, {"o", 3}, {"_", 4}, {"<", 5}, {"x", 6}, {">", 7}};
  auto lowered = Make(
      {{"vocab", vocab}, {"merges", Json::array()}},
      {{"added_tokens", Json::array({token("Hello")})}, {"normalizer", {{"type", "Lowercase"}}}});
  ASSERT_TRUE(lowered.ok()) << lowered.status();
  EXPECT_EQ(Encode(**lowered, "HELLO"), (std::vector<int32_t>{8}));
  EXPECT_EQ(Encode(**lowered, "hello"), (std::vector<int32_t>{8}));
  auto prepended = Make({{"vocab", vocab}, {"merges", Json::array()}},
                        {{"added_tokens", Json::array({token("<x>")})},
                         {"normalizer", {{"type", "Prepend"}, {"prepend", "_"}}}});
  ASSERT_TRUE(prepended.ok()) << prepended.status();
  EXPECT_EQ(Encode(**prepended, "<x>"), (std::vector<int32_t>{8}));               // "_<x>" whole
  EXPECT_EQ(Encode(**prepended, "h<x>"), (std::vector<int32_t>{4, 0, 5, 6, 7}));  // "_h<x>"
  EXPECT_EQ((*prepended)->TokenId("<x>"), 8);  // looked up by its content
}

// Invalid UTF-8 becomes one U+FFFD per ill-formed sequence's maximal subpart, as Python's
// errors="replace" and Rust's from_utf8_lossy make it (the expected texts are Python's).
TEST(HuggingFaceUnicodeTest, InvalidBytesAreReplacedAsPythonAndRustReplaceThem) {
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(hf::ValidUtf8("\xE2\x82"
                          "A"),
            r + "A");
  EXPECT_EQ(hf::ValidUtf8("\xFF\xFE"), r + r);
  EXPECT_EQ(hf::ValidUtf8("\xF0\x9F\x98"), r);
  EXPECT_EQ(hf::ValidUtf8("\xED\xA0\x80"), r + r + r);  // a surrogate's bytes
  EXPECT_EQ(hf::ValidUtf8("a\xC3"), "a" + r);
  EXPECT_EQ(hf::ValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
}

// The library's matcher goes on where a match ended: a token in the whitespace an rstrip
// took is found there (the library's splits then overlap), and a single_word match refused
// is passed over whole, not retried inside.
TEST(HuggingFaceAddedTokensTest, MatchingGoesOnWhereTheLastMatchEnded) {
  const auto token = [](int id, const std::string& content, bool rstrip, bool single_word) {
    return Json{{"id", id},        {"content", content}, {"single_word", single_word},
                {"lstrip", false}, {"rstrip", rstrip},   {"normalized", false},
                {"special", false}};
  };
  Json vocab = {{"x", 0}, {"<", 1}, {"a", 2}, {">", 3}, {"\n", 4}};
  auto stripped = Make(
      {{"vocab", vocab}, {"merges", Json::array()}},
      {{"added_tokens", Json::array({token(5, "A", true, false), token(8, "\n", false, false)})}});
  ASSERT_TRUE(stripped.ok()) << stripped.status();
  EXPECT_EQ(Encode(**stripped, "A\nx"), (std::vector<int32_t>{5, 4, 0}));
  auto single = Make({{"vocab", vocab}, {"merges", Json::array()}},
                     {{"added_tokens",
                       Json::array({token(5, "<a>", false, true), token(6, "a>", false, false)})}});
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(Encode(**single, "x<a>"), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Encode(**single, "x <a> "), (std::vector<int32_t>{0, 5}));
}

// Added tokens take the ids the library gives them whatever their entries say (it only
// warns): an earlier entry's id for the same content (whose later flags stand), else the
// model's id for it, else the next one from the model's token count.
TEST(HuggingFaceAddedTokensTest, IdsAreTheLibrarysNotTheFilesWhereTheyDiffer) {
  const auto token = [](int id, const std::string& content, bool rstrip) {
    return Json{{"id", id},        {"content", content}, {"single_word", false},
                {"lstrip", false}, {"rstrip", rstrip},   {"normalized", false},
                {"special", true}};
  };
  auto tokenizer =
      Make({{"vocab", {{"a", 0}, {" ", 1}}}, {"merges", Json::array()}},
           {{"added_tokens", Json::array({token(9, "<x>", false), token(2, "<y>", false),
                                          token(5, "<x>", true), token(7, "a", false)})}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->TokenId("<x>"), 2);
  EXPECT_EQ((*tokenizer)->TokenId("<y>"), 3);
  EXPECT_EQ((*tokenizer)->TokenId("a"), 0);
  EXPECT_EQ((*tokenizer)->vocab_size(), 4);
  // "<x>" takes the space after it (rstrip, from its later entry).
  EXPECT_EQ(Encode(**tokenizer, "<x> <y>a"), (std::vector<int32_t>{2, 3, 0}));
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
      {R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", "a"]}})",
       "model.merges[1]: is \"a\", not two tokens separated by a space"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [["a"]]}})",
       "model.merges[0]: is [\"a\"], not a merge"},
      {R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})",
       "model.vocab[\"a\"]: is \"zero\", not an id"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})",
       "model.dropout: is 0.1"},
      {"{" + model + R"(, "added_tokens": [{"id": 1}]})", "added_tokens[0].content: is missing"},
      // The library's AddedToken has no defaults: it refuses an entry without a flag.
      {"{" + model + R"(, "added_tokens": [{"id": 1, "content": "x", "single_word": false,
              "lstrip": false, "rstrip": false, "special": true}]})",
       "added_tokens[0].normalized: is missing"},
      {"{" + model + R"(, "added_tokens": [{"id": 1, "content": "x", "single_word": false,
              "lstrip": null, "rstrip": false, "normalized": false, "special": true}]})",
       "added_tokens[0].lstrip: is null, not true or false"},
      // An id sizes the model's tables: one past the bound would ask for gigabytes.
      {R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})",
       "model.vocab[\"a\"]: is 2000000000, not an id in 0..16777215"},
      {R"({"model": {"type": "BPE", "vocab": {"a": 2147483647}, "merges": []}})",
       "not an id in 0..16777215"},
      // Stripping nothing would never end; the library's content is one character.
      {"{" + model + R"(, "decoder": {"type": "Strip", "content": "", "start": 1, "stop": 0}})",
       "decoder.content: is \"\", not one character"},
      {"{" + model + R"(, "decoder": {"type": "Strip", "content": "ab", "start": 1, "stop": 0}})",
       "decoder.content: is \"ab\", not one character"},
      {"{" + model + R"(, "pre_tokenizer": {"type": "Metaspace", "replacement": ""}})",
       "pre_tokenizer.replacement: is \"\", not one character"},
      {"{" + model + R"(, "decoder": {"type": "Metaspace", "replacement": "\u2581\u2581"}})",
       "decoder.replacement: is"},
      // The library refuses a file whose two ways of saying it disagree.
      {"{" + model +
           R"(, "pre_tokenizer": {"type": "Metaspace", "add_prefix_space": false,
              "prepend_scheme": "always"}})",
       "pre_tokenizer.prepend_scheme: is \"always\" where add_prefix_space is false"},
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

// An added token of empty content is skipped, as the library skips it: no token, no id.
TEST(HuggingFaceTokenizerTest, AnAddedTokenOfEmptyContentIsSkipped) {
  auto tokenizer = Make({{"vocab", {{"a", 0}}}, {"merges", Json::array()}},
                        {{"added_tokens", Json::array({AddedEntry(1, ""), AddedEntry(2, "<x>")})}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->TokenId("<x>"), 1);  // the next id after the model's
  EXPECT_EQ((*tokenizer)->vocab_size(), 2);
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
  // Its ids count in the vocabulary's size, which a model's vocab_size is checked against.
  EXPECT_EQ((*tokenizer)->vocab_size(), 3);
}

// `text` encoded as the corpus encodes it when it cuts wherever CanCutAt allows.
std::vector<int32_t> EncodeCut(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  ForEachCutPiece(
      text, [&](std::string_view piece, bool first) { tokenizer.Encode(piece, first, &ids); });
  return ids;
}

// Mistral's and Llama 2's files prepend "▁" to each stretch of text: a cut would add one.
TEST(HuggingFaceCutTest, APrependingNormalizerIsNotCut) {
  auto tokenizer =
      Make({{"vocab", {{"\u2581", 0}, {"a", 1}, {"\n", 2}, {"B", 3}, {"b", 4}}},
            {"merges", Json::array()}},
           {{"normalizer",
             {{"type", "Sequence"},
              {"normalizers",
               {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "a\nBb"), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(EncodeCut(**tokenizer, "a\nBb"), (std::vector<int32_t>{0, 1, 2, 0, 3, 4}));
  EXPECT_FALSE((*tokenizer)->KeepsIdsAtCuts());
}

// GPT-2's and Llama 3's expressions end a piece at such a newline: cuts keep the ids.
TEST(HuggingFaceCutTest, AByteLevelExpressionIsCut) {
  auto tokenizer = Make(
      {{"vocab", {{"a", 0}, {"\u010a", 1}, {"B", 2}, {"b", 3}, {"Bb", 4}}}, {"merges", {"B b"}}},
      {{"pre_tokenizer",
        {{"type", "ByteLevel"},
         {"add_prefix_space", false},
         {"trim_offsets", true},
         {"use_regex", true}}}});
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_TRUE((*tokenizer)->KeepsIdsAtCuts());
  EXPECT_EQ(EncodeCut(**tokenizer, "a\nBb\nbB"), Encode(**tokenizer, "a\nBb\nbB"));
}

// Gemma 3's pre-tokenizer, as tokenizer.json's top-level keys: it splits at spaces only.
Json SplitAtSpaces() {
  return {{"pre_tokenizer",
           {{"type", "Split"},
            {"pattern", {{"String", " "}}},
            {"behavior", "MergedWithPrevious"},
            {"invert", false}}}};
}

// With Gemma 3's pre-tokenizer the newline and the letter share a piece, and a model with
// a token joining them would encode the cut otherwise.
TEST(HuggingFaceCutTest, APieceAcrossTheCutIsCutOnlyWhereNoTokenJoinsIt) {
  const Json rest = SplitAtSpaces();
  auto apart = Make(
      {{"vocab", {{"a", 0}, {"\n", 1}, {"B", 2}, {"b", 3}, {" ", 4}}}, {"merges", Json::array()}},
      rest);
  ASSERT_TRUE(apart.ok()) << apart.status();
  EXPECT_TRUE((*apart)->KeepsIdsAtCuts());
  EXPECT_EQ(EncodeCut(**apart, "a\nBb"), Encode(**apart, "a\nBb"));
  auto joined = Make({{"vocab", {{"a", 0}, {"\n", 1}, {"B", 2}, {"b", 3}, {" ", 4}, {"\nB", 5}}},
                      {"merges", {"\n B"}}},
                     rest);
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(Encode(**joined, "a\nBb"), (std::vector<int32_t>{0, 5, 3}));
  EXPECT_EQ(EncodeCut(**joined, "a\nBb"), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_FALSE((*joined)->KeepsIdsAtCuts());
}

// Gemma 3's model fuses unknown characters but falls back on byte tokens, all 256 of
// them: no character is unknown, so nothing fuses across a cut, and the file's documents
// are cut (and encoded on several threads). Without every byte token the model is not cut
// (conservatively: an unknown run would have to hold the newline to cross a cut).
TEST(HuggingFaceCutTest, FusedUnknownsAreCutOnlyWhereEveryByteFallsBack) {
  Json vocab = {{"<unk>", 0}, {"a", 1}, {"\n", 2}, {"B", 3}, {"b", 4}, {"a\n", 5}};
  for (int byte = 0; byte < 256; ++byte) vocab[absl::StrFormat("<0x%02X>", byte)] = 6 + byte;
  Json model = {{"vocab", vocab},
                {"merges", {"a \n"}},
                {"unk_token", "<unk>"},
                {"fuse_unk", true},
                {"byte_fallback", true}};
  auto every_byte = Make(model, SplitAtSpaces());
  ASSERT_TRUE(every_byte.ok()) << every_byte.status();
  EXPECT_TRUE((*every_byte)->KeepsIdsAtCuts());
  // \u00e9, not in the vocabulary, falls back on its two byte tokens.
  const std::string text =
      "a\n\xC3\xA9"
      "b\na\nBb";
  EXPECT_EQ(Encode(**every_byte, text),
            (std::vector<int32_t>{5, 6 + 0xC3, 6 + 0xA9, 4, 2, 5, 3, 4}));
  EXPECT_EQ(EncodeCut(**every_byte, text), Encode(**every_byte, text));

  Json fewer = model;
  fewer["vocab"].erase("<0xA9>");
  auto missing_byte = Make(fewer, SplitAtSpaces());
  ASSERT_TRUE(missing_byte.ok()) << missing_byte.status();
  EXPECT_FALSE((*missing_byte)->KeepsIdsAtCuts());
}

// With ignore_merges a piece that is a token is that token: "a\n" cut off alone is one,
// where "a\nB" whole merges to "a", "\n", "B" (no merge makes "a\n"). Not cut.
TEST(HuggingFaceCutTest, IgnoredMergesAreNotCut) {
  auto tokenizer = Make({{"vocab", {{"a", 0}, {"\n", 1}, {"B", 2}, {"a\n", 3}}},
                         {"merges", Json::array()},
                         {"ignore_merges", true}},
                        SplitAtSpaces());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(Encode(**tokenizer, "a\nB"), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(EncodeCut(**tokenizer, "a\nB"), (std::vector<int32_t>{3, 2}));
  EXPECT_FALSE((*tokenizer)->KeepsIdsAtCuts());
}

// An lstrip token starting with a letter takes the newline before it, and a single_word
// token ending in a newline is refused before a letter: a cut would change both. Not cut.
TEST(HuggingFaceCutTest, AddedTokensThatACutWouldMatchOtherwiseAreNotCut) {
  const Json vocab = {{"w", 0}, {"\n", 1}, {"B", 2}, {"a", 3}, {"r", 4}};
  const auto added = [](const std::string& content, bool lstrip, bool single_word) {
    return Json::array({{{"id", 5},
                         {"content", content},
                         {"single_word", single_word},
                         {"lstrip", lstrip},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", false}}});
  };
  auto lstrip = Make({{"vocab", vocab}, {"merges", Json::array()}},
                     {{"added_tokens", added("Bar", true, false)}});
  ASSERT_TRUE(lstrip.ok()) << lstrip.status();
  EXPECT_EQ(Encode(**lstrip, "w\nBar"), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ(EncodeCut(**lstrip, "w\nBar"), (std::vector<int32_t>{0, 1, 5}));
  EXPECT_FALSE((*lstrip)->KeepsIdsAtCuts());

  auto single_word = Make({{"vocab", vocab}, {"merges", Json::array()}},
                          {{"added_tokens", added("w\n", false, true)}});
  ASSERT_TRUE(single_word.ok()) << single_word.status();
  EXPECT_EQ(Encode(**single_word, "w\nBar"), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(EncodeCut(**single_word, "w\nBar"), (std::vector<int32_t>{5, 2, 3, 4}));
  EXPECT_FALSE((*single_word)->KeepsIdsAtCuts());

  auto plain = Make({{"vocab", vocab}, {"merges", Json::array()}},
                    {{"added_tokens", added("Bar", false, false)}});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE((*plain)->KeepsIdsAtCuts());
}

TEST(HuggingFaceCutTest, APrefixSpaceOrAnAlwaysPrependedMetaspaceIsNotCut) {
  auto prefix_space = Make({{"vocab", {{"a", 0}, {"\u0120", 1}}}, {"merges", Json::array()}},
                           {{"pre_tokenizer",
                             {{"type", "ByteLevel"},
                              {"add_prefix_space", true},
                              {"trim_offsets", true},
                              {"use_regex", true}}}});
  ASSERT_TRUE(prefix_space.ok()) << prefix_space.status();
  EXPECT_FALSE((*prefix_space)->KeepsIdsAtCuts());
  auto always = Make({{"vocab", {{"a", 0}, {"\u2581", 1}}}, {"merges", Json::array()}},
                     {{"pre_tokenizer",
                       {{"type", "Metaspace"},
                        {"replacement", "\u2581"},
                        {"prepend_scheme", "always"},
                        {"split", true}}}});
  ASSERT_TRUE(always.ok()) << always.status();
  EXPECT_FALSE((*always)->KeepsIdsAtCuts());
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
