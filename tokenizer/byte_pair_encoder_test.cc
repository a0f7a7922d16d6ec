#include "tokenizer/byte_pair_encoder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace tokenizer {
namespace {

// Every byte as itself (id = byte), then the merges given, ids from 256 on.
BytePairEncoder Encoder(const std::vector<std::pair<std::string, int32_t>>& merges) {
  std::vector<BpeToken> tokens;
  tokens.reserve(256 + merges.size());
  for (int byte = 0; byte < 256; ++byte) tokens.push_back({std::string(1, char(byte)), byte, 0});
  int32_t id = 256;
  for (const auto& [bytes, priority] : merges) tokens.push_back({bytes, id++, priority});
  return *BytePairEncoder::Create(tokens);
}

std::vector<int32_t> Ids(const BytePairEncoder& encoder, const std::string& piece) {
  std::vector<int32_t> ids;
  encoder.Encode(piece, &ids);
  return ids;
}

TEST(BytePairEncoderTest, MergesTheLowestPriorityPairFirst) {
  // ab (256, first), bc (257), abc (258): "abcd" merges a+b, then ab+c.
  const BytePairEncoder encoder = Encoder({{"ab", 0}, {"bc", 1}, {"abc", 2}});
  EXPECT_EQ(Ids(encoder, "abcd"), (std::vector<int32_t>{258, 'd'}));
  // bc before ab: "xabcb" merges b+c first, then a+bc (its concatenation "abc" is a
  // token: the rule keys on the bytes, not on the pair), and x+a never.
  const BytePairEncoder bc_first = Encoder({{"ab", 5}, {"bc", 1}, {"abc", 9}});
  EXPECT_EQ(Ids(bc_first, "xabcb"), (std::vector<int32_t>{'x', 258, 'b'}));
  const BytePairEncoder no_abc = Encoder({{"ab", 5}, {"bc", 1}});
  EXPECT_EQ(Ids(no_abc, "xabc"), (std::vector<int32_t>{'x', 'a', 257}));
  EXPECT_EQ(Ids(bc_first, "abc"), (std::vector<int32_t>{258}));  // the whole piece is a token
}

TEST(BytePairEncoderTest, TakesTheLeftmostOfEqualPairs) {
  const BytePairEncoder encoder = Encoder({{"aa", 0}});
  EXPECT_EQ(Ids(encoder, "aaa"), (std::vector<int32_t>{256, 'a'}));
  EXPECT_EQ(Ids(encoder, "aaaaa"), (std::vector<int32_t>{256, 256, 'a'}));
}

TEST(BytePairEncoderTest, ALongPieceMergesToItsTokens) {
  const BytePairEncoder encoder = Encoder({{"aa", 0}, {"aaaa", 1}, {"aaaaaaaa", 2}});
  const std::vector<int32_t> ids = Ids(encoder, std::string(1 << 20, 'a'));
  ASSERT_EQ(ids.size(), (1u << 20) / 8);
  for (int32_t id : ids) ASSERT_EQ(id, 258);
  EXPECT_TRUE(Ids(encoder, "").empty());
}

TEST(BytePairEncoderTest, RefusesAVocabularyWithoutEveryByte) {
  std::vector<BpeToken> tokens;
  tokens.reserve(256);
  for (int byte = 0; byte < 255; ++byte) tokens.push_back({std::string(1, char(byte)), byte, 0});
  auto encoder = BytePairEncoder::Create(tokens);
  ASSERT_FALSE(encoder.ok());
  EXPECT_EQ(encoder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(encoder.status().message().find("byte 255"), std::string::npos);
  tokens.push_back({std::string(1, char(255)), 7, 0});  // 7 twice
  EXPECT_NE(BytePairEncoder::Create(tokens).status().message().find("id 7"), std::string::npos);
}

TEST(BytePairEncoderTest, GivesTheBytesOfAnId) {
  const BytePairEncoder encoder = Encoder({{"ab", 0}});
  ASSERT_NE(encoder.Bytes(256), nullptr);
  EXPECT_EQ(*encoder.Bytes(256), "ab");
  EXPECT_EQ(encoder.Bytes(257), nullptr);
  EXPECT_EQ(encoder.Bytes(-1), nullptr);
  EXPECT_EQ(encoder.size(), 257);
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
