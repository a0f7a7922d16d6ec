#include "contracts/byte_tokens.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/tokens-", getpid());
}

std::vector<uint16_t> ReadIds(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream bytes;
  bytes << file.rdbuf();
  const std::string data = bytes.str();
  std::vector<uint16_t> ids(data.size() / 2);
  std::memcpy(ids.data(), data.data(), data.size());
  return ids;
}

TEST(TokenizeBytes, SplitsTheConcatenatedTextIntoTrainAndValidation) {
  const std::string dir = TempDir();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/a.txt") << "hello ";
  std::ofstream(dir + "/b.txt") << "w\xc3\xb6rld";  // UTF-8 bytes are ids too
  auto out = TokenizeBytes({dir + "/a.txt", dir + "/b.txt"}, dir + "/out", 0.25);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->train_tokens + out->val_tokens, 12);
  EXPECT_EQ(out->val_tokens, 3);
  const std::vector<uint16_t> train = ReadIds(out->train_path), val = ReadIds(out->val_path);
  EXPECT_EQ(train, (std::vector<uint16_t>{'h', 'e', 'l', 'l', 'o', ' ', 'w', 0xc3, 0xb6}));
  EXPECT_EQ(val, (std::vector<uint16_t>{'r', 'l', 'd'}));
}

TEST(TokenizeBytes, RefusesBadInput) {
  EXPECT_EQ(TokenizeBytes({"/no/such/text"}, TempDir(), 0.1).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(TokenizeBytes({}, TempDir(), 1.0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ByteIds, RoundTripAndEscapeControlCharacters) {
  EXPECT_EQ(BytesToIds("Ab\n"), (std::vector<int64_t>{65, 98, 10}));
  EXPECT_EQ(IdsToPrintable({72, 105, 10, 27, 9, 300}), "Hi\n\\x1b\t<300>");
}

}  // namespace
}  // namespace shardwise
