#include "tokenizer/manifest.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tokenizer/load.h"

namespace shardwise {
namespace tokenizer {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

// A tiktoken rank file of every byte (ids 0..255): the smallest real vocabulary.
std::string WriteByteRanks() {
  std::string path = TempPath("bytes.tiktoken");
  std::ofstream out(path);
  const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int byte = 0; byte < 256; ++byte) {
    out << digits[byte >> 2] << digits[(byte & 3) << 4] << "== " << byte << "\n";
  }
  return path;
}

TEST(ManifestTest, SavesLoadsAndCopiesAFolder) {
  const TokenizerFiles files{"tiktoken", "cl100k_base", {{"ranks", WriteByteRanks()}}};
  auto tokenizer = LoadFromFiles(files);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string dir = TempPath("tok");
  auto saved = SaveTokenizerFolder(dir, files, **tokenizer);
  ASSERT_TRUE(saved.ok()) << saved.status();
  auto read = ReadManifest(dir);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->kind, "tiktoken");
  EXPECT_EQ(read->encoding, "cl100k_base");
  EXPECT_EQ(read->vocab_size, 100277);
  EXPECT_EQ(read->files.at("ranks").name, "ranks.tiktoken");
  auto loaded = LoadTokenizer(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<int32_t> ids;
  (*loaded)->Encode("hi", true, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{'h', 'i'}));

  const std::string model = TempPath("gpt.safetensors");
  EXPECT_EQ(ModelTokenizerFolder(model), TempPath("gpt.tokenizer"));
  ASSERT_TRUE(CopyTokenizerFolder(dir, ModelTokenizerFolder(model), /*replace=*/false).ok());
  EXPECT_TRUE(LoadTokenizer(ModelTokenizerFolder(model)).ok());
  std::vector<std::string> copied;  // the two files, and no temporary left beside them
  for (const auto& entry : fs::directory_iterator(ModelTokenizerFolder(model))) {
    copied.push_back(entry.path().filename().string());
  }
  std::sort(copied.begin(), copied.end());
  EXPECT_EQ(copied, (std::vector<std::string>{"ranks.tiktoken", "shardwise-tokenizer.json"}));
  // The same copy again (a re-queued attempt's) leaves the files as they are; a file
  // there with other bytes is replaced only when told to, as a job's final model is.
  EXPECT_TRUE(CopyTokenizerFolder(dir, ModelTokenizerFolder(model), /*replace=*/false).ok());
  std::ofstream(ModelTokenizerFolder(model) + "/ranks.tiktoken", std::ios::app) << "mine\n";
  EXPECT_EQ(CopyTokenizerFolder(dir, ModelTokenizerFolder(model), /*replace=*/false).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(CopyTokenizerFolder(dir, ModelTokenizerFolder(model), /*replace=*/true).ok());
  EXPECT_TRUE(LoadTokenizer(ModelTokenizerFolder(model)).ok());
}

TEST(ManifestTest, ACorruptFileIsDataLoss) {
  const TokenizerFiles files{"tiktoken", "gpt2", {{"ranks", WriteByteRanks()}}};
  auto tokenizer = LoadFromFiles(files);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string dir = TempPath("corrupt");
  ASSERT_TRUE(SaveTokenizerFolder(dir, files, **tokenizer).ok());
  std::ofstream(dir + "/ranks.tiktoken", std::ios::app) << "IQ== 300\n";
  EXPECT_EQ(LoadTokenizer(dir).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CopyTokenizerFolder(dir, TempPath("copy"), /*replace=*/true).code(),
            absl::StatusCode::kDataLoss);
}

// A folder written before the manifest was renamed holds it as tokenizer.json.
TEST(ManifestTest, AFolderWithTheOldManifestNameIsRead) {
  const std::string dir = TempPath("old-name");
  fs::create_directories(dir);
  std::ofstream(dir + "/tokenizer.json")
      << R"({"format": "shardwise-tokenizer/1", "kind": "bytes", "vocab_size": 256})";
  auto manifest = ReadManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->kind, "bytes");
}

TEST(ManifestTest, NamesWhatIsWrong) {
  EXPECT_EQ(ReadManifest(TempPath("nowhere")).status().code(), absl::StatusCode::kNotFound);
  const std::string dir = TempPath("bad");
  fs::create_directories(dir);
  const auto with = [&](const std::string& json) {
    std::ofstream(dir + "/shardwise-tokenizer.json") << json;
    return std::string(ReadManifest(dir).status().message());
  };
  EXPECT_NE(with("[1]").find("not JSON"), std::string::npos);
  EXPECT_NE(with(R"({"format": 3})").find("format"), std::string::npos);
  EXPECT_NE(with(R"({"format": "shardwise-tokenizer/1", "kind": "wordpiece"})").find("wordpiece"),
            std::string::npos);
  EXPECT_NE(with(R"({"format": "shardwise-tokenizer/1", "kind": "bytes", "vocab_size": "x"})")
                .find("vocab_size"),
            std::string::npos);
  EXPECT_NE(with(R"({"format": "shardwise-tokenizer/1", "kind": "bytes", "vocab_size": 256,
                     "files": {"model": {"name": "../x", "sha256": "00"}}})")
                .find("files.model.name"),
            std::string::npos);
  EXPECT_NE(with(R"({"format": "shardwise-tokenizer/1", "kind": "bytes", "vocab_size": 256,
                     "eos_id": 256})")
                .find("eos_id is not an id below vocab_size 256"),
            std::string::npos);
  EXPECT_TRUE(ReadManifest(dir).status().code() == absl::StatusCode::kInvalidArgument);
}

// A huggingface folder made from a tokenizer.json and the tokenizer_config.json beside it:
// the manifest holds the config's BOS and EOS ids, and the export copies both files under
// Hugging Face's names, and nothing of the folder's own (its manifest).
TEST(ManifestTest, CopiesWhatHuggingFaceReadsUnderItsNames) {
  const std::string source = TempPath("hub");
  fs::create_directories(source);
  std::ofstream(source + "/tokenizer.json") << R"({"added_tokens": [
      {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true},
      {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
       "normalized": false, "special": true}],
      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})";
  const std::string config = R"({"bos_token": "<s>", "eos_token": "</s>", "chat_template": "x"})";
  std::ofstream(source + "/tokenizer_config.json") << config;
  const TokenizerFiles files{"huggingface",
                             "",
                             {{"tokenizer_json", source + "/tokenizer.json"},
                              {"tokenizer_config_json", source + "/tokenizer_config.json"}}};
  auto tokenizer = LoadFromFiles(files);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string dir = TempPath("hf-tok");
  ASSERT_TRUE(SaveTokenizerFolder(dir, files, **tokenizer).ok());
  auto manifest = ReadManifest(dir);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_EQ(manifest->bos_id, 1);
  EXPECT_EQ(manifest->eos_id, 2);
  EXPECT_TRUE(LoadTokenizer(dir).ok());

  const std::string exported = TempPath("export");
  auto copied = CopyHuggingFaceTokenizer(dir, exported, /*replace=*/false);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->eos_id, 2);
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(exported)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json"}));
  std::ifstream in(exported + "/tokenizer_config.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), config);
  for (const std::string& name : names) {  // every name the submission check knows
    EXPECT_NE(std::find(std::begin(kHuggingFaceTokenizerNames),
                        std::end(kHuggingFaceTokenizerNames), name),
              std::end(kHuggingFaceTokenizerNames))
        << name;
  }
  // Again (a re-queued attempt): the same bytes stay; other bytes are not replaced.
  EXPECT_TRUE(CopyHuggingFaceTokenizer(dir, exported, /*replace=*/false).ok());
  std::ofstream(exported + "/tokenizer.json", std::ios::app) << " ";
  EXPECT_EQ(CopyHuggingFaceTokenizer(dir, exported, /*replace=*/false).status().code(),
            absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
