#include "tokenizer/token_file_writer.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/token_files.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace tokenizer {
namespace {

TEST(TokenFileWriterTest, WritesWhatTheWorkersRead) {
  const std::string dir = testing::ScratchRoot();
  for (const int64_t vocab_size : {int64_t{50257}, int64_t{200019}}) {
    const std::string stem = absl::StrCat(dir, "/tokens-", vocab_size);
    auto writer = TokenFileWriter::Open(stem, vocab_size);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append({1, 2, 50256}).ok());
    ASSERT_TRUE(
        (*writer)->Append(std::vector<int32_t>(1000, vocab_size > 65536 ? 199998 : 7)).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    EXPECT_EQ((*writer)->count(), 1003);
    const bool wide = vocab_size > 65536;
    EXPECT_EQ((*writer)->path(), stem + (wide ? ".safetensors" : ".bin"));
    auto layout = InspectTokenFile("data.tokens.train_path", (*writer)->path(),
                                   v1::TokenData::FORMAT_UNSPECIFIED, Links::kFollow);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->count, 1003);
    EXPECT_EQ(layout->element, wide ? 4 : 2);
    std::ifstream in((*writer)->path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    const std::string file = bytes.str();
    const auto id_at = [&](int64_t i) {
      uint32_t id = 0;
      for (int b = 0; b < layout->element; ++b) {
        id |= static_cast<uint32_t>(
                  static_cast<unsigned char>(file[layout->offset + i * layout->element + b]))
              << (8 * b);
      }
      return id;
    };
    EXPECT_EQ(id_at(2), 50256u);
    EXPECT_EQ(id_at(1002), wide ? 199998u : 7u);
  }
}

}  // namespace
}  // namespace tokenizer
}  // namespace shardwise
