#include "tokenizer/transformers_config.h"

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/huggingface/huggingface_tokenizer.h"
#include "tokenizer/sentencepiece_api.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace shardwise {
namespace tokenizer {
namespace {

using Json = nlohmann::json;

Json AddedToken(int id, const std::string& content) {
  return {{"id", id},        {"content", content},  {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

// A tokenizer.json with <s> (1) and </s> (2) as added tokens, and a template putting
// `single` around each document.
std::unique_ptr<HuggingFaceTokenizer> MakeHuggingFace(const Json& single) {
  Json special = Json::object();
  for (const char* token : {"<s>", "</s>"}) {
    special[token] = {{"id", token}, {"ids", {std::string(token) == "<s>" ? 1 : 2}}};
  }
  const Json json = {
      {"added_tokens", {AddedToken(1, "<s>"), AddedToken(2, "</s>")}},
      {"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", Json::array()}}},
      {"post_processor",
       {{"type", "TemplateProcessing"}, {"single", single}, {"special_tokens", special}}}};
  auto tokenizer = HuggingFaceTokenizer::FromJson(json.dump(), "tokenizer.json");
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? std::move(*tokenizer) : nullptr;
}

Json Piece(const char* kind, const char* id) { return {{kind, {{"id", id}, {"type_id", 0}}}}; }

TEST(TransformersConfigTest, AHuggingFaceTokenizerWithoutItsConfigGetsOneNamingItsTemplate) {
  auto tokenizer = MakeHuggingFace(
      {Piece("SpecialToken", "<s>"), Piece("Sequence", "A"), Piece("SpecialToken", "</s>")});
  ASSERT_NE(tokenizer, nullptr);
  auto config = MakeTransformersConfig("huggingface", *tokenizer, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_id, 1);
  EXPECT_EQ(config->eos_id, 2);
  const Json json = Json::parse(config->tokenizer_config_json);
  EXPECT_EQ(json["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(json["bos_token"], "<s>");
  EXPECT_EQ(json["eos_token"], "</s>");

  // Llama 3's template puts only its BOS before a document: no EOS is known.
  auto prefix_only = MakeHuggingFace({Piece("SpecialToken", "<s>"), Piece("Sequence", "A")});
  ASSERT_NE(prefix_only, nullptr);
  config = MakeTransformersConfig("huggingface", *prefix_only, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_id, 1);
  EXPECT_EQ(config->eos_id, std::nullopt);
  EXPECT_TRUE(Json::parse(config->tokenizer_config_json)["eos_token"].is_null());
}

// The user's tokenizer_config.json is kept byte for byte (its chat template, its class);
// its special tokens give the ids, whichever form they take.
TEST(TransformersConfigTest, TheUsersConfigIsKeptAndNamesTheIds) {
  auto tokenizer = MakeHuggingFace({Piece("SpecialToken", "<s>"), Piece("Sequence", "A")});
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = R"({"tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": {"__type": "AddedToken", "content": "<s>", "special": true},
    "eos_token": "</s>", "chat_template": "{{ messages }}"})";
  const UserConfig user{"tokenizer_config.json", text};
  auto config = MakeTransformersConfig("huggingface", *tokenizer, &user);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tokenizer_config_json, text);
  EXPECT_EQ(config->bos_id, 1);
  EXPECT_EQ(config->eos_id, 2);  // the config's, though the template puts none after

  const auto refusal = [&](const std::string& text) {
    const UserConfig user{"tokenizer_config.json", text};
    auto config = MakeTransformersConfig("huggingface", *tokenizer, &user);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << text;
    return std::string(config.status().message());
  };
  EXPECT_TRUE(absl::StrContains(refusal(R"({"eos_token": "<|eot_id|>"})"),
                                "tokenizer_config.json: eos_token \"<|eot_id|>\" is no token"));
  EXPECT_TRUE(absl::StrContains(refusal(R"({"bos_token": 7})"),
                                "tokenizer_config.json: bos_token: is 7, not a token's text"));
  EXPECT_TRUE(absl::StrContains(refusal("[1]"), "tokenizer_config.json: not a JSON object"));
  EXPECT_TRUE(absl::StrContains(refusal(std::string(100, '[') + std::string(100, ']')),
                                "nests deeper than 64 levels"));
  // Another kind takes no tokenizer_config.json.
  ByteTokenizer bytes;
  EXPECT_EQ(MakeTransformersConfig("bytes", bytes, &user).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TransformersConfigTest, GptTwosEndOfTextIsBosEosAndUnknown) {
  // GPT-2's encoding over a vocabulary of bytes: its <|endoftext|> is 50256.
  const std::string path = testing::ScratchPath("bytes.tiktoken");
  {
    std::ofstream out(path);
    const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int byte = 0; byte < 256; ++byte) {
      out << digits[byte >> 2] << digits[(byte & 3) << 4] << "== " << byte << "\n";
    }
  }
  auto gpt2 = ByteLevelBpe::FromTiktoken(path, "gpt2");
  ASSERT_TRUE(gpt2.ok()) << gpt2.status();
  auto config = MakeTransformersConfig("gpt2", **gpt2, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_id, 50256);
  EXPECT_EQ(config->eos_id, 50256);
  const Json json = Json::parse(config->tokenizer_config_json);
  EXPECT_EQ(json["tokenizer_class"], "GPT2Tokenizer");
  for (const char* key : {"bos_token", "eos_token", "unk_token"}) {
    EXPECT_EQ(json[key], "<|endoftext|>") << key;
  }
  EXPECT_EQ(json["add_prefix_space"], false);
  // tiktoken's files are none transformers reads: ids, no config.
  config = MakeTransformersConfig("tiktoken", **gpt2, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tokenizer_config_json, "");
  EXPECT_EQ(config->eos_id, 50256);
}

TEST(TransformersConfigTest, ASentencePieceModelIsALlamaTokenizerWithItsOwnPieces) {
  const std::string corpus = testing::ScratchPath("corpus.txt");
  {
    std::ofstream out(corpus);
    const char* words[] = {"the",   "program", "is",    "free",    "software", "copy",  "modify",
                           "share", "work",    "terms", "license", "Debian",   "naïve", "café"};
    for (int line = 0; line < 2000; ++line) {
      for (int i = 0; i < 8; ++i) out << words[(line * 7 + i * 3 + line / 5) % 14] << " ";
      out << line << "\n";
    }
  }
  // Pieces and ids of its own, not SentencePiece's defaults (<s> 1, </s> 2, <unk> 0).
  std::string model;
  ASSERT_EQ(spm::Train({{"model_type", "bpe"},
                        {"vocab_size", "300"},
                        {"bos_piece", "<bos>"},
                        {"eos_piece", "<eos>"},
                        {"unk_piece", "<unknown>"},
                        {"unk_id", "0"},
                        {"bos_id", "2"},
                        {"eos_id", "1"},
                        {"minloglevel", "2"}},
                       {corpus}, &model),
            "");
  auto tokenizer = SentencePieceTokenizer::FromSerialized(model, "trained");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto config = MakeTransformersConfig("sentencepiece", **tokenizer, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bos_id, 2);
  EXPECT_EQ(config->eos_id, 1);
  const Json json = Json::parse(config->tokenizer_config_json);
  EXPECT_EQ(json["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(json["bos_token"], "<bos>");
  EXPECT_EQ(json["eos_token"], "<eos>");
  EXPECT_EQ(json["unk_token"], "<unknown>");
  EXPECT_EQ(json["add_bos_token"], true);  // as the token files have them
  EXPECT_EQ(json["add_eos_token"], true);
  EXPECT_EQ(json["legacy"], true);
}

TEST(TransformersConfigTest, BytesHaveNeitherConfigNorIds) {
  ByteTokenizer bytes;
  auto config = MakeTransformersConfig("bytes", bytes, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->tokenizer_config_json, "");
  EXPECT_EQ(config->bos_id, std::nullopt);
  EXPECT_EQ(config->eos_id, std::nullopt);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
