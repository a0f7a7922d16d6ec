// The safetensors format: the bytes the format requires, round trips, corrupt files,
// metadata.

#include "contracts/safetensors.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

TEST(Safetensors, BytesAreWhatTheFormatRequires) {
  TensorMap tensors;
  const float w[] = {1.0f, -2.0f};
  tensors["0.weight"] = F32Tensor({1, 2}, w);
  const std::string bytes = EncodeSafetensors(tensors);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"0.weight":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})";
  const size_t padded = (header.size() + 7) / 8 * 8;
  ASSERT_EQ(bytes.size(), 8 + padded + 8);
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);  // little-endian on this platform
  EXPECT_EQ(length, padded);
  EXPECT_EQ(bytes.substr(8, header.size()), header);
  EXPECT_EQ(bytes.substr(8 + header.size(), padded - header.size()),
            std::string(padded - header.size(), ' '));
  float data[2];
  std::memcpy(data, bytes.data() + 8 + padded, 8);
  EXPECT_EQ(data[0], 1.0f);
  EXPECT_EQ(data[1], -2.0f);
}

TEST(Safetensors, RoundTripsThroughAFile) {
  const std::string path = TempPath("round.safetensors");
  TensorMap tensors;
  const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {-1, 0.5f}, c[] = {7}, d[] = {0, 0, 0};
  tensors["0.weight"] = F32Tensor({2, 3}, a);
  tensors["0.bias"] = F32Tensor({2}, b);
  tensors["2.weight"] = F32Tensor({1, 1}, c);
  tensors["2.bias"] = F32Tensor({3}, d);
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  auto read = ReadSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 4u);
  for (const auto& [name, t] : tensors) {
    EXPECT_EQ(read->at(name).shape, t.shape) << name;
    EXPECT_EQ(read->at(name).bytes, t.bytes) << name;
  }
}

TEST(Safetensors, RejectsCorruptFiles) {
  const std::string path = TempPath("corrupt.safetensors");
  TensorMap tensors;
  const float w[] = {1.0f};
  tensors["w"] = F32Tensor({1}, w);
  std::string bytes = EncodeSafetensors(tensors);
  bytes.resize(bytes.size() - 2);  // truncated data
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(ReadSafetensors(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadSafetensors("/no/such/file").status().code(), absl::StatusCode::kNotFound);
}

// A header whose declared sizes overflow 64 bits once multiplied (each dimension fits
// the file; here even a tensor of no elements, whose other dimensions multiply past
// int64) or whose offsets disagree with its shape: refused, nothing read.
TEST(Safetensors, RefusesDeclaredSizesThatOverflowOrDisagree) {
  auto file_with_header = [](const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    const uint64_t length = header.size();
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
    return bytes + header + std::string(data_bytes, '\0');
  };
  const std::string overflow = file_with_header(
      R"({"x":{"dtype":"F32","shape":[60000,60000,60000,60000,0],"data_offsets":[0,0]}})", 60000);
  auto index = ParseSafetensorsIndex("overflow.safetensors", overflow);
  EXPECT_EQ(index.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(index.status().message().find("has a dimension of 60000 that does not fit the file"),
            std::string::npos)
      << index.status();
  // 2^62 elements of 4 bytes: the element count fits, the bytes overflow.
  const std::string bytes_overflow = file_with_header(
      R"({"x":{"dtype":"F32","shape":[65536,65536,65536,16384],"data_offsets":[0,16]}})", 65536);
  EXPECT_EQ(ParseSafetensorsIndex("big.safetensors", bytes_overflow).status().code(),
            absl::StatusCode::kDataLoss);
  const std::string disagree =
      file_with_header(R"({"x":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", 16);
  EXPECT_EQ(ParseSafetensorsIndex("short.safetensors", disagree).status().code(),
            absl::StatusCode::kDataLoss);
  const std::string path = TempPath("overflow.safetensors");
  std::ofstream(path, std::ios::binary) << overflow;
  EXPECT_EQ(ReadSafetensors(path).status().code(), absl::StatusCode::kDataLoss);
  // A real tensor of no elements is fine.
  const std::string empty =
      file_with_header(R"({"x":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}})", 0);
  auto fine = ParseSafetensorsIndex("empty.safetensors", empty);
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->tensors.at("x").shape, (std::vector<int64_t>{0, 4}));
}

TEST(Safetensors, KeepsMetadataAndIndexesWithoutReadingTheData) {
  const std::string path = TempPath("meta.safetensors");
  TensorMap tensors;
  const float w[] = {1.0f, 2.0f, 3.0f};
  tensors["w"] = F32Tensor({3}, w);
  ASSERT_TRUE(WriteSafetensors(path, tensors, {{"shardwise.model", "{\"gpt\": {}}"}}).ok());
  auto metadata = ReadSafetensorsMetadata(path);
  ASSERT_TRUE(metadata.ok()) << metadata.status();
  EXPECT_EQ(metadata->at("format"), "pt");
  EXPECT_EQ(metadata->at("shardwise.model"), "{\"gpt\": {}}");
  auto index = ReadSafetensorsIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->tensors.at("w").end - index->tensors.at("w").begin, 12u);
  EXPECT_EQ(ReadSafetensorsIndex("/no/such/file").status().code(), absl::StatusCode::kNotFound);
}

// A streamed write's file is the one WriteSafetensors writes for the same tensors, byte
// for byte; a tensor that comes with another size than its layout's writes nothing.
TEST(Safetensors, AStreamedWriteIsTheWholeWriteAndHoldsEachTensorToItsLayout) {
  TensorMap tensors;
  const float a[] = {1.0f, 2.0f, 3.0f}, b[] = {4.0f};
  tensors["b"] = F32Tensor({1}, b);
  tensors["a"] = F32Tensor({3}, a);
  const Metadata metadata{{"shardwise.attempt", "2"}};
  TensorLayouts layouts;
  for (const auto& [name, tensor] : tensors) {
    layouts[name] = {"F32", tensor.shape, tensor.bytes.size()};
  }
  const std::string path = TempPath("streamed.safetensors");
  std::vector<std::string> order;
  ASSERT_TRUE(WriteSafetensorsStreamed(path, layouts, metadata,
                                       [&](const std::string& name, FileAppender& file) {
                                         order.push_back(name);
                                         return file.Append(tensors.at(name).bytes);
                                       })
                  .ok());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "b"}));
  std::ifstream in(path, std::ios::binary);
  const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(written, EncodeSafetensors(tensors, metadata));

  const std::string short_path = TempPath("short.safetensors");
  const absl::Status short_write = WriteSafetensorsStreamed(
      short_path, layouts, metadata,
      [&](const std::string&, FileAppender& file) { return file.Append("1234"); });
  EXPECT_EQ(short_write.code(), absl::StatusCode::kInternal);
  EXPECT_NE(short_write.message().find("tensor 'a' came with 4 bytes, its layout says 12"),
            std::string::npos)
      << short_write;
  EXPECT_FALSE(std::ifstream(short_path).good());
}

// A file read through its index has no size bound: a checkpoint's shard of a large model
// outgrows 64 GiB (a sparse file here, nothing written but its header). Read whole, the
// bound stands.
TEST(Safetensors, AFileReadThroughItsIndexHasNoSizeBound) {
  const uint64_t bytes = kMaxSafetensorsFileBytes + 4096;
  const std::string header = EncodeSafetensorsHeader(
      {{"x", {"F32", {static_cast<int64_t>(bytes / 4)}, bytes}}}, Metadata{});
  const std::string path = TempPath("large.safetensors");
  std::ofstream(path, std::ios::binary) << header;
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(header.size() + bytes)), 0);
  const auto index = ReadSafetensorsIndex(path);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->tensors.at("x").end - index->tensors.at("x").begin, bytes);
  EXPECT_EQ(ReadSafetensors(path).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove(path.c_str());
}

// A FIFO would block a reader until some writer came; a device would never end.
TEST(Safetensors, RefusesWhatIsNotARegularFileWithoutOpeningIt) {
  const std::string fifo = TempPath("fifo.safetensors");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(ReadSafetensors(fifo).status().message().find("not a regular file"), std::string::npos);
  EXPECT_NE(ReadSafetensors("/dev/zero").status().message().find("not a regular file"),
            std::string::npos);
  EXPECT_EQ(ReadSafetensorsIndex(fifo).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardwise
