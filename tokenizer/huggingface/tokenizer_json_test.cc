// tokenizer.json read in one pass: the document equals nlohmann's parse of the file less
// model.vocab and model.merges, which come as lists in the file's order, each merge in the
// form the file gives it.

#include "tokenizer/huggingface/tokenizer_json.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tokenizer/huggingface/bpe_model.h"

namespace shardwise {
namespace tokenizer {
namespace hf {
namespace {

using Json = nlohmann::json;
using Form = MergeEntry::Form;

constexpr const char* kFile = R"({
  "version": "1.0", "truncation": null, "padding": false,
  "added_tokens": [{"id": 3, "content": "<s>", "special": true, "lstrip": false}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
  "post_processor": {"type": "ByteLevel", "trim_offsets": 1.5e0, "x": [[], {}, "\u00e9\ud83d\ude00"]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "a",
            "vocab": {"b": 1, "a": 0, "ab": 2, "odd": {"id": [7]}},
            "merges": ["a b", ["a", "b"], 5, ["x"], [], ["a", "b", "c"], [["n"], "m"], ["p", {"q": 1}],
                       {"l": "r"}],
            "fuse_unk": false}
})";

TEST(TokenizerJsonTest, TheDocumentIsTheParseLessTheListedMembers) {
  auto read = ReadTokenizerJson(kFile, "t.json");
  ASSERT_TRUE(read.ok()) << read.status();
  Json expected = Json::parse(kFile);
  expected["model"].erase("vocab");
  expected["model"].erase("merges");
  EXPECT_EQ(read->document, expected) << read->document.dump();

  ASSERT_TRUE(read->model.vocab.has_value());
  const VocabEntries vocab = {
      {"b", 1}, {"a", 0}, {"ab", 2}, {"odd", Json::parse(R"({"id": [7]})")}};
  EXPECT_EQ(*read->model.vocab, vocab);  // the file's order, not sorted by token

  ASSERT_TRUE(read->model.merges.has_value());
  const std::vector<MergeEntry>& merges = *read->model.merges;
  ASSERT_EQ(merges.size(), 9u);
  EXPECT_EQ(merges[0].form, Form::kText);
  EXPECT_EQ(merges[0].left, "a b");
  EXPECT_EQ(merges[1].form, Form::kPair);
  EXPECT_EQ(merges[1].left, "a");
  EXPECT_EQ(merges[1].right, "b");
  const std::vector<std::string> others = {
      "5",           R"(["x"])", "[]", R"(["a","b","c"])", R"([["n"],"m"])", R"(["p",{"q":1}])",
      R"({"l":"r"})"};
  for (size_t i = 0; i < others.size(); ++i) {
    EXPECT_EQ(merges[2 + i].form, Form::kOther) << i;
    EXPECT_EQ(merges[2 + i].other.dump(), others[i]) << i;
  }
}

// Only model.vocab as an object and model.merges as an array are listed: elsewhere, or of
// another type, a member stays in the document (for the model's error naming it).
TEST(TokenizerJsonTest, OnlyTheModelsVocabularyAndMergesAreListed) {
  const std::string text = R"({"vocab": {"a": 0}, "merges": ["a b"],
      "decoder": {"vocab": {"a": 0}, "merges": []},
      "model": {"vocab": [["a", 0]], "merges": {"a": "b"}}})";
  auto read = ReadTokenizerJson(text, "t.json");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->document, Json::parse(text));
  EXPECT_FALSE(read->model.vocab.has_value());
  EXPECT_FALSE(read->model.merges.has_value());
}

// A key given twice takes its later value, as nlohmann's parse does, a listed member too:
// given again as a list it is that list, as another type the document's.
TEST(TokenizerJsonTest, AKeyGivenTwiceTakesItsLaterValue) {
  struct Case {
    std::string text;
    std::optional<std::vector<std::string>> vocab;  // its tokens
    std::optional<size_t> merges;                   // how many
  };
  const std::vector<Case> cases = {
      {R"({"a": 1, "a": {"b": 2}, "x": [{"k": 1, "k": [2]}]})", std::nullopt, std::nullopt},
      {R"({"model": {"vocab": {"a": 0}, "vocab": {"b": 1, "c": 2}}})",
       std::vector<std::string>{"b", "c"}, std::nullopt},
      {R"({"model": {"vocab": {"a": 0}, "vocab": 7}})", std::nullopt, std::nullopt},
      {R"({"model": {"vocab": 7, "vocab": {"a": 0}}})", std::vector<std::string>{"a"},
       std::nullopt},
      {R"({"model": {"merges": 3, "merges": ["a b", ["a", "b"]]}})", std::nullopt, 2},
      {R"({"model": {"merges": ["a b"], "merges": null}})", std::nullopt, std::nullopt},
      {R"({"model": {"merges": ["a b"], "merges": []}})", std::nullopt, 0},
      {R"({"model": {"merges": [{"k": 1, "k": 2}]}, "model": {"type": "BPE"}})", std::nullopt,
       std::nullopt},
  };
  for (const Case& c : cases) {
    auto read = ReadTokenizerJson(c.text, "t.json");
    ASSERT_TRUE(read.ok()) << c.text << ": " << read.status();
    Json expected = Json::parse(c.text);
    if (c.vocab.has_value()) expected["model"].erase("vocab");
    if (c.merges.has_value()) expected["model"].erase("merges");
    EXPECT_EQ(read->document, expected) << c.text;
    ASSERT_EQ(read->model.vocab.has_value(), c.vocab.has_value()) << c.text;
    if (c.vocab.has_value()) {
      std::vector<std::string> tokens;
      for (const auto& [token, id] : *read->model.vocab) tokens.push_back(token);
      EXPECT_EQ(tokens, *c.vocab) << c.text;
    }
    ASSERT_EQ(read->model.merges.has_value(), c.merges.has_value()) << c.text;
    if (c.merges.has_value()) {
      EXPECT_EQ(read->model.merges->size(), *c.merges) << c.text;
    }
  }
}

TEST(TokenizerJsonTest, RefusesWhatIsNotOneJsonObject) {
  for (const std::string text : {"[1]", "\"model\"", "{\"a\": 1", "{\"a\": 1} 2", "", "{'a': 1}"}) {
    const absl::Status status = ReadTokenizerJson(text, "t.json").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(status.message(), "t.json: not a JSON object") << text;
  }
  const std::string deep = "{\"a\": " + std::string(70, '[') + std::string(70, ']') + "}";
  EXPECT_EQ(ReadTokenizerJson(deep, "t.json").status().message(),
            "t.json: nests deeper than 64 levels");
}

// A token given twice keeps its later id, as the library's map does: its earlier entries
// are not read (an earlier id out of bounds is no error), and their ids are no token's
// unless another token has them.
TEST(TokenizerJsonTest, ATokenGivenTwiceKeepsItsLaterId) {
  auto read = ReadTokenizerJson(R"({"model": {"vocab": {"a": 16777215, "b": 0, "c": 1, "d": 1,
      "e": 4, "a": 2, "c": 3, "e": "four", "e": 5, "g": 6, "f": 6, "f": 7}, "merges": []}})",
                                "t.json");
  ASSERT_TRUE(read.ok()) << read.status();
  auto model = BpeModel::FromJson(read->document["model"], std::move(read->model), "model");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->Id("a"), 2);
  EXPECT_EQ(model->Id("c"), 3);
  EXPECT_EQ(model->Id("d"), 1);
  EXPECT_EQ(model->Id("e"), 5);
  EXPECT_EQ(model->Id("f"), 7);
  EXPECT_EQ(model->Id("g"), 6);
  EXPECT_EQ(model->size(), 8);  // ids 0..7: 16777215 was only "a"'s earlier one
  EXPECT_EQ(model->token_count(), 7);
  const std::vector<std::pair<int32_t, const char*>> tokens = {
      {0, "b"}, {1, "d"}, {2, "a"}, {3, "c"}, {5, "e"}, {6, "g"}, {7, "f"}};
  for (const auto& [id, token] : tokens) {
    ASSERT_NE(model->Token(id), nullptr) << id;  // 1 was "c"'s too, 6 "f"'s
    EXPECT_EQ(*model->Token(id), token) << id;
  }
  EXPECT_EQ(model->Token(4), nullptr);  // "e"'s earlier id
}

// Two tokens whose ids (their last) are one are refused, naming the second: the id would
// decode to either, and the cut-safety check would see only one.
TEST(TokenizerJsonTest, TwoTokensOfOneIdAreRefused) {
  auto read = ReadTokenizerJson(
      R"({"model": {"vocab": {"a": 0, "\nB": 3, "zz": 3}, "merges": []}})", "t.json");
  ASSERT_TRUE(read.ok()) << read.status();
  auto model = BpeModel::FromJson(read->document["model"], std::move(read->model), "model");
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("model.vocab[\"zz\"]"), std::string::npos)
      << model.status();
  EXPECT_NE(model.status().message().find("is 3, the id of"), std::string::npos) << model.status();
}

}  // namespace
}  // namespace hf
}  // namespace tokenizer
}  // namespace shardwise
