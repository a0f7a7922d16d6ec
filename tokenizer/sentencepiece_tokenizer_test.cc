#include "tokenizer/sentencepiece_tokenizer.h"

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tokenizer/sentencepiece_api.h"

namespace shardwise {
namespace tokenizer {
namespace {

// Lines of words drawn from a small list, with the odd double space and tab.
std::string WriteCorpus(const std::string& name, int lines) {
  const std::vector<std::string> words = {"the",     "program",    "license", "free",  "software",
                                          "copy",    "modify",     "Debian",  "1984,", "GNU",
                                          "éternel", "distribute", "work",    "terms"};
  std::mt19937 random(3);
  std::string path = testing::ScratchPath(name);
  std::ofstream out(path);
  for (int line = 0; line < lines; ++line) {
    for (int i = 0; i < 8; ++i) {
      out << words[random() % words.size()] << (random() % 9 == 0 ? "  " : " ");
    }
    out << (line % 5 == 0 ? "\t\n" : "\n");
  }
  return path;
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SentencePieceTraining training;
    training.vocab_size = 440;
    corpus_ = new std::string(WriteCorpus("corpus.txt", 2000));
    auto model = TrainSentencePiece(training, {*corpus_});
    ASSERT_TRUE(model.ok()) << model.status();
    serialized_ = new std::string(*model);
    auto tokenizer = SentencePieceTokenizer::FromSerialized(*model, "trained");
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = tokenizer->release();
  }
  static std::string* corpus_;
  static std::string* serialized_;
  static SentencePieceTokenizer* tokenizer_;
};
std::string* SentencePieceTokenizerTest::corpus_ = nullptr;
std::string* SentencePieceTokenizerTest::serialized_ = nullptr;
SentencePieceTokenizer* SentencePieceTokenizerTest::tokenizer_ = nullptr;

TEST_F(SentencePieceTokenizerTest, TrainsAModelOfTheSizeAskedWithBosAndEos) {
  EXPECT_EQ(tokenizer_->vocab_size(), 440);
  EXPECT_EQ(tokenizer_->DocumentPrefix(), (std::vector<int32_t>{1}));
  EXPECT_EQ(tokenizer_->DocumentSuffix(), (std::vector<int32_t>{2}));
  std::vector<int32_t> ids;
  tokenizer_->Encode("the program", true, &ids);
  EXPECT_EQ(ids.size(), 2u);  // whole words are pieces: "▁the", "▁program"
}

TEST_F(SentencePieceTokenizerTest, DecodesWhatItEncodesWholeOrCut) {
  std::ifstream in(*corpus_);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text += "unseen ☃ characters\x01 come back as bytes\n";
  // The library itself on the whole text, against the tokenizer (which encodes line by
  // line) on the whole text and on pieces cut where the corpus tokenizer cuts.
  std::string error;
  const auto library = spm::Model::Load(*serialized_, &error);
  ASSERT_NE(library, nullptr) << error;
  std::vector<int32_t> whole;
  library->Encode(text, /*dummy_prefix=*/true, &whole);
  std::vector<int32_t> encoded;
  tokenizer_->Encode(text, true, &encoded);
  EXPECT_EQ(encoded, whole);
  EXPECT_EQ(tokenizer_->Decode(whole), text);
  std::vector<int32_t> pieces;
  ForEachCutPiece(
      text, [&](std::string_view piece, bool first) { tokenizer_->Encode(piece, first, &pieces); });
  EXPECT_EQ(pieces, whole);
}

// An id outside the vocabulary (a padded model's sample) is shown as <id>, as the other
// tokenizers show it, and the text around it is decoded as the library decodes the ids
// inside the vocabulary together (it refused the whole list: nothing was shown).
TEST_F(SentencePieceTokenizerTest, ShowsAnIdOutsideTheVocabularyAsItsNumber) {
  std::vector<int32_t> ids;
  tokenizer_->Encode("the program", true, &ids);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(tokenizer_->Decode({ids[0], 440, ids[1], -1}), "the<440> program<-1>");
  EXPECT_EQ(tokenizer_->Decode({99999}), "<99999>");
  // A piece's leading space is dropped at the text's start only: after an <id>, it stays.
  EXPECT_EQ(tokenizer_->Decode({-1, ids[0], ids[1]}), "<-1> the program");
  EXPECT_EQ(tokenizer_->Decode({ids[0], ids[1]}), "the program");
}

TEST(SentencePieceTrainingTest, PresetsAndOverrides) {
  SentencePieceTraining llama2;
  llama2.preset = "llama2";
  auto options = TrainerOptions(llama2);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->at("vocab_size"), "32000");
  EXPECT_EQ(options->at("byte_fallback"), "true");
  EXPECT_EQ(options->at("normalization_rule_name"), "identity");
  SentencePieceTraining small;
  small.model_type = "unigram";
  small.vocab_size = 1000;
  options = TrainerOptions(small);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->at("model_type"), "unigram");
  EXPECT_EQ(options->at("vocab_size"), "1000");
  EXPECT_EQ(options->at("character_coverage"), "1.0");
}

TEST(SentencePieceTrainingTest, NamesTheFieldThatIsWrong) {
  SentencePieceTraining training;
  training.preset = "llama9";
  EXPECT_NE(TrainerOptions(training).status().message().find("llama9"), std::string::npos);
  training = {};
  training.model_type = "char";
  EXPECT_NE(TrainerOptions(training).status().message().find("model_type"), std::string::npos);
  training = {};
  training.vocab_size = 100;
  EXPECT_NE(TrainerOptions(training).status().message().find("vocab_size 100"), std::string::npos);
  training = {};
  training.character_coverage = 0.5;
  EXPECT_EQ(TrainerOptions(training).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(TrainerOptions(training).status().message().find("character_coverage 0.5"),
            std::string::npos)
      << TrainerOptions(training).status();
  EXPECT_EQ(SentencePieceTokenizer::Load("/nonexistent.model").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(SentencePieceTokenizer::FromSerialized("not a model", "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
