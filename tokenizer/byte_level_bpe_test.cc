#include "tokenizer/byte_level_bpe.h"

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tokenizer/encodings.h"
#include "tokenizer/pre_split.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocabulary_files.h"

namespace shardwise {
namespace tokenizer {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

// A small vocabulary: every byte, then these merges in order (ids 256 on).
const std::vector<std::string> kMerges = {" t", "he",  " the", "in", " a",  "an",   " an",
                                          "er", "ing", " in",  "re", "and", " and", "\n\n"};

// The vocabulary as a tiktoken rank file.
std::string WriteTiktoken() {
  std::string path = TempPath("small.tiktoken");
  std::ofstream out(path);
  for (int byte = 0; byte < 256; ++byte) {
    out << absl::Base64Escape(std::string(1, char(byte))) << " " << byte << "\n";
  }
  for (size_t i = 0; i < kMerges.size(); ++i) {
    out << absl::Base64Escape(kMerges[i]) << " " << 256 + i << "\n";
  }
  return path;
}

std::string Spelt(const std::string& bytes) {
  std::string spelt;
  for (unsigned char c : bytes) spelt += Gpt2CharacterOfByte(c);
  return spelt;
}

// GPT-2's spelling has no control characters: only quotes and backslashes need escapes.
std::string JsonEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// The same vocabulary as GPT-2's encoder.json and vocab.bpe, each merge split in two
// tokens that exist before it.
std::pair<std::string, std::string> WriteGpt2Files() {
  const std::string encoder = TempPath("encoder.json"), merges = TempPath("vocab.bpe");
  std::ofstream json(encoder), bpe(merges);
  bpe << "#version: 0.2\n";
  json << "{";
  for (int byte = 0; byte < 256; ++byte) {
    json << "\"" << JsonEscaped(Spelt(std::string(1, char(byte)))) << "\": " << byte << ", ";
  }
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {" ", "t"}, {"h", "e"},  {" t", "he"}, {"i", "n"}, {" ", "a"},  {"a", "n"},   {" a", "n"},
      {"e", "r"}, {"in", "g"}, {" ", "in"},  {"r", "e"}, {"an", "d"}, {" an", "d"}, {"\n", "\n"}};
  for (size_t i = 0; i < pairs.size(); ++i) {
    bpe << Spelt(pairs[i].first) << " " << Spelt(pairs[i].second) << "\n";
    json << "\"" << Spelt(kMerges[i]) << "\": " << 256 + i << ", ";
  }
  json << "\"<|endoftext|>\": 270}";
  return {encoder, merges};
}

std::vector<int32_t> Encode(const Tokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> ids;
  tokenizer.Encode(text, true, &ids);
  return ids;
}

TEST(PreSplitTest, CutsAsGpt2Does) {
  auto splitter = PreSplitter::Create(FindEncoding("gpt2")->pattern);
  ASSERT_TRUE(splitter.ok()) << splitter.status();
  std::vector<std::string> pieces;
  splitter->Split("Hello world's 42 ok!!   \n\nend  ",
                  [&](absl::string_view piece) { pieces.emplace_back(piece); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hello", " world", "'s", " 42", " ok", "!!", "   \n",
                                              "\n", "end", "  "}));
}

TEST(PreSplitTest, EveryEncodingsPatternCompilesAndCoversTheText) {
  const std::string text = "Don't STOP me now: 12345 ünïcödé 東京\r\n\tdone/ x  \xff tail";
  for (const std::string name : {"gpt2", "p50k_base", "cl100k_base", "o200k_base", "llama3"}) {
    auto splitter = PreSplitter::Create(FindEncoding(name)->pattern);
    ASSERT_TRUE(splitter.ok()) << name << ": " << splitter.status();
    std::string joined;
    splitter->Split(text, [&](absl::string_view piece) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += std::string(piece);
    });
    EXPECT_EQ(joined, text) << name;
  }
  EXPECT_EQ(PreSplitter::Create("(unclosed").status().code(), absl::StatusCode::kInvalidArgument);
}

// Past PCRE2's default limit of 10 million backtracks (Llama 3's `\s*[\r\n]+` over a run
// of spaces) the pieces are still the pattern's, not the rest of the text as one piece.
TEST(PreSplitTest, ALongRunIsSplitPastPcresDefaultLimits) {
  auto splitter = PreSplitter::Create(FindEncoding("llama3")->pattern);
  ASSERT_TRUE(splitter.ok()) << splitter.status();
  std::vector<size_t> sizes;
  std::string text;
  text.resize(11'000'000, ' ');
  text += "a";
  splitter->Split(text, [&](absl::string_view piece) { sizes.push_back(piece.size()); });
  EXPECT_EQ(sizes, (std::vector<size_t>{10'999'999, 2}));
}

// \C matches a byte whatever the character: its pieces would not be UTF-8. Refused.
TEST(PreSplitTest, RefusesAPatternMatchingSingleBytes) {
  const auto splitter = PreSplitter::Create("\\C");
  EXPECT_EQ(splitter.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(splitter.status().message().find("does not compile"), std::string::npos)
      << splitter.status();
}

TEST(PreSplitTest, FindsTheValidUtf8Prefix) {
  EXPECT_EQ(ValidUtf8Prefix("abc"), 3u);
  EXPECT_EQ(ValidUtf8Prefix("a\xc3\xa9z"), 4u);
  EXPECT_EQ(ValidUtf8Prefix("a\xc0\xafz"), 1u);          // overlong
  EXPECT_EQ(ValidUtf8Prefix("a\xed\xa0\x80"), 1u);       // a surrogate
  EXPECT_EQ(ValidUtf8Prefix("ab\xf4\x90\x80\x80"), 2u);  // past U+10FFFF
  EXPECT_EQ(ValidUtf8Prefix("ab\xe6\x9d"), 2u);          // cut short
}

TEST(ByteLevelBpeTest, TiktokenAndGpt2FilesOfOneVocabularyEncodeAlike) {
  auto tiktoken = ByteLevelBpe::FromTiktoken(WriteTiktoken(), "gpt2");
  ASSERT_TRUE(tiktoken.ok()) << tiktoken.status();
  const auto [encoder, merges] = WriteGpt2Files();
  auto gpt2 = ByteLevelBpe::FromGpt2Files(encoder, merges);
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  const std::string text = "the thing and the ring\n\nin an answer, then the end";
  const std::vector<int32_t> ids = Encode(**tiktoken, text);
  EXPECT_EQ(Encode(**gpt2, text), ids);
  // "the": h+e (257), and t+he is no token; " thing": " t" (256) first, so never " the".
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + 3),
            (std::vector<int32_t>{'t', 257, 256}));
  EXPECT_EQ((*gpt2)->Decode(ids), text);
  EXPECT_EQ((*gpt2)->DocumentSuffix(), (std::vector<int32_t>{270}));
  EXPECT_EQ((*gpt2)->Decode({270, 99999}), "<|endoftext|><99999>");
  EXPECT_EQ((*tiktoken)->vocab_size(), 50257);  // GPT-2's encoding: its special id is 50256
}

void ExpectCutsKeepIds(const char* name) {
  auto tokenizer = ByteLevelBpe::FromTiktoken(WriteTiktoken(), name);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::mt19937 random(7);
  const std::string alphabet = "ab \n\n\nB\t.,'sAZ09\xc3\xa9\xff";
  for (int round = 0; round < 300; ++round) {
    std::string text;
    for (int i = 0; i < 60; ++i) text += alphabet[random() % alphabet.size()];
    const std::vector<int32_t> whole = Encode(**tokenizer, text);
    EXPECT_EQ((*tokenizer)->Decode(whole), text);
    std::vector<int32_t> pieces;
    ForEachCutPiece(text, [&](std::string_view piece, bool first) {
      (*tokenizer)->Encode(piece, first, &pieces);
    });
    EXPECT_EQ(pieces, whole) << absl::CEscape(text);
  }
}

// Every encoding's pattern, on random texts dense in newlines and spaces (the "\n\n" merge
// tells a piece "\n\n" from two "\n"s, as GPT-2's vocabulary does).
TEST(ByteLevelBpeTest, DecodesWhatItEncodesAndCutsWhereItMay) {
  for (const char* name : {"gpt2", "p50k_base", "cl100k_base", "o200k_base"}) {
    SCOPED_TRACE(name);
    ExpectCutsKeepIds(name);
  }
}

TEST(ByteLevelBpeTest, ANewlineAfterWhitespaceIsNoPlaceToCut) {
  EXPECT_TRUE(CanCutAt("a\nB", 2));
  EXPECT_TRUE(CanCutAt("\nB", 1));
  EXPECT_FALSE(CanCutAt("a\n\nB", 3));  // GPT-2: "\n", "\n" whole; "\n\n" cut
  EXPECT_FALSE(CanCutAt("a \nB", 3));
  EXPECT_FALSE(CanCutAt("a\r\nB", 3));
  EXPECT_FALSE(CanCutAt("a\xc2\xa0\nB", 4));      // U+00A0
  EXPECT_FALSE(CanCutAt("a\xe3\x80\x80\nB", 5));  // U+3000
  EXPECT_TRUE(CanCutAt("\xc3\xa9\nB", 3));        // é
  EXPECT_TRUE(CanCutAt("\xe6\x9d\xb1\nB", 4));    // 東
  EXPECT_FALSE(CanCutAt("a\n1", 2));
}

TEST(ByteLevelBpeTest, RefusesFilesThatDoNotFit) {
  auto unknown = ByteLevelBpe::FromTiktoken(WriteTiktoken(), "r99k");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("cl100k_base"), std::string::npos);
  EXPECT_EQ(ByteLevelBpe::FromTiktoken(TempPath("none.tiktoken"), "gpt2").status().code(),
            absl::StatusCode::kNotFound);
  const std::string bad = TempPath("bad.tiktoken");
  std::ofstream(bad) << "IQ== 0\nnot-base64! 1\n";
  auto parsed = ByteLevelBpe::FromTiktoken(bad, "gpt2");
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("bad.tiktoken:2"), std::string::npos);
  // An encoder.json nested deep is refused unparsed (parsed, it would take gigabytes).
  const auto deep =
      ParseGpt2Files("encoder.json", "{\"a\":" + std::string(100'000, '['), "vocab.bpe", "");
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(deep.status().message().find("encoder.json: nests deeper than 64 levels"),
            std::string::npos)
      << deep.status();
}

// Ids past any vocabulary (an id of 2^31 - 1 asked for gigabytes of tables) and a special
// token's id that is another token's (65 would have made "<|endoftext|>" the byte "A").
TEST(ByteLevelBpeTest, RefusesIdsPastAnyVocabularyOrSharedWithAToken) {
  const std::string huge = TempPath("huge.tiktoken");
  std::string ranks;
  for (int byte = 0; byte < 256; ++byte) {
    absl::StrAppend(&ranks, absl::Base64Escape(std::string(1, char(byte))), " ", byte, "\n");
  }
  for (const char* rank : {"2147483647", "300000000", "99999999999999999999", "-3"}) {
    std::ofstream(huge) << ranks << absl::Base64Escape("ab") << " " << rank << "\n";
    auto parsed = ByteLevelBpe::FromTiktoken(huge, "gpt2");
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << rank;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(),
                                  absl::StrCat("huge.tiktoken:257: the rank \"", rank,
                                               "\" is not an id in 0..", kMaxTokenId)))
        << parsed.status();
  }
  const auto [encoder, merges] = WriteGpt2Files();
  std::ifstream in(encoder);
  const std::string json((std::istreambuf_iterator<char>(in)), {});
  for (const auto& [id, message] : std::vector<std::pair<std::string, std::string>>{
           {"4294967303", "the id of \"<|endoftext|>\" is 4294967303, not an integer id"},
           {"-1", "the id of \"<|endoftext|>\" is -1, not an integer id"},
           {"65", "the special token \"<|endoftext|>\" has id 65, which another token has"}}) {
    std::ofstream(encoder) << absl::StrReplaceAll(
        json, {{"\"<|endoftext|>\": 270", "\"<|endoftext|>\": " + id}});
    auto parsed = ByteLevelBpe::FromGpt2Files(encoder, merges);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << id;
    EXPECT_TRUE(absl::StrContains(parsed.status().message(), message)) << parsed.status();
  }
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
