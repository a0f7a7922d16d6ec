#include "tokenizer/corpus.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/corpus_chunker.h"

namespace shardwise {
namespace tokenizer {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

std::string Write(const std::string& name, const std::string& text) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Bytes as ids, with a marker id around each document, to see documents' edges.
class MarkedBytes : public ByteTokenizer {
 public:
  int64_t vocab_size() const override { return 258; }
  std::vector<int32_t> DocumentPrefix() const override { return {256}; }
  std::vector<int32_t> DocumentSuffix() const override { return {257}; }
};

std::vector<uint16_t> Ids(const std::string& path) {
  const std::string bytes = Read(path);
  std::vector<uint16_t> ids(bytes.size() / 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<uint16_t>(static_cast<unsigned char>(bytes[2 * i]) |
                                   static_cast<unsigned char>(bytes[2 * i + 1]) << 8);
  }
  return ids;
}

TEST(CorpusChunkerTest, CutsAfterANewlineBeforeALetterAndAtTheSplit) {
  const std::string text = "one two\nthree\n four\nfive six\nseven\n";
  std::string path = Write("doc.txt", text);
  CorpusChunker chunker({path}, /*split_offset=*/22, /*chunk_bytes=*/4);
  std::vector<Chunk> chunks;
  Chunk chunk;
  while (*chunker.Next(&chunk)) chunks.push_back(chunk);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].text, "one two\n");
  EXPECT_TRUE(chunks[0].document_start);
  EXPECT_EQ(chunks[1].text, "three\n four\n");  // no cut before a space
  EXPECT_EQ(chunks[2].text, "five six\n");      // the split (byte 22) falls here
  EXPECT_FALSE(chunks[2].val);
  EXPECT_EQ(chunks[3].text, "seven\n");
  EXPECT_TRUE(chunks[3].val);
  EXPECT_TRUE(chunks[3].document_end);
  EXPECT_FALSE(chunks[1].document_start || chunks[1].document_end);
}

TEST(CorpusChunkerTest, CutsAnUncuttableLineAtAUtf8Boundary) {
  std::string text;
  for (int i = 0; i < 40; ++i) text += "\xc3\xa9";  // é, no newline
  CorpusChunker chunker({Write("line.txt", text)}, 1000, 5, /*cut_documents=*/true,
                        /*max_chunk_bytes=*/16);
  Chunk chunk;
  std::string joined;
  std::vector<size_t> sizes;
  while (*chunker.Next(&chunk)) {
    sizes.push_back(chunk.text.size());
    joined += chunk.text;
  }
  EXPECT_EQ(joined, text);
  // Each cut at max_chunk_bytes (a character boundary), not a chunk_bytes apart.
  EXPECT_EQ(sizes, (std::vector<size_t>{16, 16, 16, 16, 16}));
  // A tokenizer whose ids a cut may change keeps each document whole up to that size.
  CorpusChunker whole({Write("document.txt", std::string(40, 'x'))}, 1000, 5,
                      /*cut_documents=*/false, /*max_chunk_bytes=*/16);
  sizes.clear();
  while (*whole.Next(&chunk)) sizes.push_back(chunk.text.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{16, 16, 8}));
}

// The bound a multiple of the block size (as the defaults are: 64 MiB of 1 MiB blocks):
// the chunk reaches it exactly, and the document goes on past it. It ended there before,
// and everything after the first 64 MiB of a file with no place to cut was lost.
TEST(CorpusChunkerTest, ADocumentGoesOnPastAChunkCutAtTheBoundWithItsBlocks) {
  const std::string text = "{\"a\": 1}\n{\"b\": 2}\n" + std::string(40, '7');  // no cut
  for (bool cut_documents : {true, false}) {
    CorpusChunker chunker({Write("blocks.txt", text), Write("next.txt", "Next\n")}, 1000, 4,
                          cut_documents, /*max_chunk_bytes=*/16);
    Chunk chunk;
    std::string joined;
    std::vector<size_t> sizes;
    int ends = 0;
    while (*chunker.Next(&chunk)) {
      if (chunk.document_end) ++ends;
      if (ends == 0) {
        EXPECT_FALSE(chunk.document_end);
      }
      if (ends == 0 || (ends == 1 && chunk.document_end)) joined += chunk.text;
      sizes.push_back(chunk.text.size());
    }
    EXPECT_EQ(joined, text) << cut_documents;
    EXPECT_EQ(ends, 2) << cut_documents;
    EXPECT_EQ(sizes.front(), 16u) << cut_documents;
  }
}

TEST(CorpusTest, WritesEachDocumentWithItsMarkersAndSplitsTrainFromVal) {
  const std::string a = Write("a.txt", "Alpha beta\ngamma\n");
  const std::string b = Write("b.txt", "Delta\nepsilon\n");
  const std::string empty = Write("empty.txt", "");
  CorpusOptions options;
  options.val_fraction = 0.4;
  options.chunk_bytes = 3;
  int progress_calls = 0;
  options.on_progress = [&](const CorpusProgress& progress) {
    ++progress_calls;
    EXPECT_EQ(progress.bytes_total, 31);
  };
  auto out = TokenizeCorpus(MarkedBytes(), {a, empty, b}, TempPath("out"), options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_GT(progress_calls, 1);
  EXPECT_EQ(out->bytes, 31);
  std::vector<uint16_t> all = Ids(out->train_path);
  const std::vector<uint16_t> val = Ids(out->val_path);
  all.insert(all.end(), val.begin(), val.end());
  std::vector<uint16_t> expected = {256};
  for (char c : std::string("Alpha beta\ngamma\n")) expected.push_back(c);
  expected.push_back(257);
  expected.push_back(256);
  for (char c : std::string("Delta\nepsilon\n")) expected.push_back(c);
  expected.push_back(257);
  EXPECT_EQ(all, expected);
  // The split: byte 18 of 31 falls in b.txt, whose first cut at or after it is "epsilon".
  EXPECT_EQ(val.size(), std::string("epsilon\n").size() + 1);
  EXPECT_EQ(out->train_tokens + out->val_tokens, static_cast<int64_t>(expected.size()));
}

// Each Encode call begins with id 258, to show where the corpus cut a document.
class CallMarkingBytes : public MarkedBytes {
 public:
  explicit CallMarkingBytes(bool keeps_ids_at_cuts) : keeps_ids_at_cuts_(keeps_ids_at_cuts) {}
  int64_t vocab_size() const override { return 259; }
  void Encode(std::string_view text, bool document_start,
              std::vector<int32_t>* ids) const override {
    ids->push_back(258);
    MarkedBytes::Encode(text, document_start, ids);
  }
  bool KeepsIdsAtCuts() const override { return keeps_ids_at_cuts_; }

 private:
  const bool keeps_ids_at_cuts_;
};

TEST(CorpusTest, ADocumentIsCutOnlyForATokenizerWhoseIdsCutsKeep) {
  const std::string doc = Write("cut.txt", "Alpha\nbeta\nGamma\ndelta\n");
  CorpusOptions options;
  options.val_fraction = 0;
  options.chunk_bytes = 4;
  for (bool keeps : {true, false}) {
    auto out = TokenizeCorpus(CallMarkingBytes(keeps), {doc}, TempPath("cut"), options);
    ASSERT_TRUE(out.ok()) << out.status();
    const std::vector<uint16_t> ids = Ids(out->train_path);
    const auto calls = std::count(ids.begin(), ids.end(), 258);
    EXPECT_EQ(calls, keeps ? 4 : 1) << "keeps ids at cuts: " << keeps;
  }
  // Its split falls between files only: one file leaves no validation text, which more
  // lines would not mend; another file would.
  options.val_fraction = 0.3;
  auto one_file = TokenizeCorpus(CallMarkingBytes(false), {doc}, TempPath("one"), options);
  EXPECT_TRUE(absl::IsInvalidArgument(one_file.status())) << one_file.status();
  EXPECT_TRUE(absl::StrContains(one_file.status().message(), "give another input file after it"))
      << one_file.status();
  auto two_files = TokenizeCorpus(CallMarkingBytes(false), {doc, Write("more.txt", "Epsilon\n")},
                                  TempPath("two"), options);
  EXPECT_TRUE(two_files.ok()) << two_files.status();
}

TEST(CorpusTest, RefusesBadInput) {
  CorpusOptions options;
  EXPECT_EQ(TokenizeCorpus(ByteTokenizer(), {TempPath("missing.txt")}, TempPath("o"), options)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(
      TokenizeCorpus(ByteTokenizer(), {Write("e.txt", "")}, TempPath("o"), options).status().code(),
      absl::StatusCode::kInvalidArgument);
  options.val_fraction = 1;
  auto refused = TokenizeCorpus(ByteTokenizer(), {Write("x.txt", "x")}, TempPath("o"), options);
  EXPECT_NE(refused.status().message().find("--val_fraction"), std::string::npos);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
