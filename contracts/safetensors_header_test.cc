#include "contracts/safetensors_header.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

int ElementSize(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "BF16") return 2;
  return 0;
}

absl::StatusOr<SafetensorsHeader> Parse(const std::string& json, uint64_t data_size) {
  return ParseSafetensorsHeader(json, data_size, ElementSize);
}

// The message of a header refused, which the test checks names what is wrong.
std::string Refusal(const std::string& json, uint64_t data_size) {
  auto parsed = Parse(json, data_size);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << json;
  return std::string(parsed.status().message());
}

TEST(SafetensorsHeaderTest, ReadsEntriesAndMetadata) {
  auto header = Parse(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
      R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8],"extra":{"nested":[1,{"x":2}]}}}  )",
      12);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->metadata.at("format"), "pt");
  EXPECT_EQ(header->tensors.at("a").shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(header->tensors.at("b").begin, 8u);
  EXPECT_EQ(header->tensors.at("b").end, 12u);
}

TEST(SafetensorsHeaderTest, RefusesValuesOfTheWrongTypeNamingThem) {
  EXPECT_TRUE(absl::StrContains(
      Refusal(R"({"x":{"dtype":"F32","shape":["32"],"data_offsets":[0,128]}})", 128),
      R"(tensor 'x' shape holding "32", not an integer >= 0)"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"x":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", 4),
                                "tensor 'x' dtype 7, not a string"));
  EXPECT_TRUE(
      absl::StrContains(Refusal(R"({"x":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                        "holding 1.5, not an integer >= 0"));
  EXPECT_TRUE(
      absl::StrContains(Refusal(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}})", 4),
                        "data_offsets holding 4.0, not an integer >= 0"));
  EXPECT_TRUE(
      absl::StrContains(Refusal(R"({"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                        "holding -1, not an integer >= 0"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"__metadata__":{"format":1}})", 0),
                                "__metadata__.format 1, not a string"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"__metadata__":"pt"})", 0), "not an object"));
  EXPECT_TRUE(
      absl::StrContains(Refusal(R"({"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
                        R"(tensor 'x' has dtype "F64")"));
}

TEST(SafetensorsHeaderTest, RefusesOffsetsThatDoNotTileTheData) {
  const std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                              R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  EXPECT_TRUE(absl::StrContains(Refusal(overlap, 12), "where the tensor before it still lies"));
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                          R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_TRUE(absl::StrContains(Refusal(gap, 12), "a gap follows the tensor before it"));
  const std::string trailing = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_TRUE(absl::StrContains(Refusal(trailing, 6), "and 2 bytes follow them"));
  EXPECT_TRUE(Parse(trailing, 4).ok());
}

// An empty tensor lies where the next one begins (Hugging Face's writer puts them so):
// whatever their names, it comes first, and the tensors tile the data.
TEST(SafetensorsHeaderTest, AnEmptyTensorMayBeginWhereAnotherDoes) {
  for (const auto& [empty, full] : {std::pair<std::string, std::string>{"a", "b"}, {"z", "a"}}) {
    const std::string json =
        absl::StrCat(R"({")", empty, R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},")",
                     full, R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)",
                     R"("m":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})");
    const auto header = Parse(json, 8);
    EXPECT_TRUE(header.ok()) << json << ": " << header.status();
  }
}

TEST(SafetensorsHeaderTest, RefusesAMalformedOrOutOfPlaceHeader) {
  EXPECT_TRUE(absl::StrContains(Refusal("[]", 0), "does not start with '{'"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"x":)", 0), "is not JSON"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"x":{"dtype":"F32","shape":[1]}})", 4),
                                "tensor 'x' lacks data_offsets"));
  EXPECT_TRUE(absl::StrContains(Refusal(R"({"x":[1]})", 0), "tensor 'x' holding an array"));
  EXPECT_TRUE(
      absl::StrContains(Refusal(R"({"x":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})", 4),
                        "holding an array"));
  // A key the format does not know may hold anything, but not without end.
  std::string deep = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"k":)";
  deep += std::string(100000, '[') + std::string(100000, ']') + "}}";
  EXPECT_TRUE(absl::StrContains(Refusal(deep, 4), "is nested too deep"));
  const std::string twice = R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},)"
                            R"("x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})";
  EXPECT_TRUE(absl::StrContains(Refusal(twice, 0), "names tensor 'x' twice"));
}

TEST(SafetensorsHeaderTest, RefusesMoreEntriesThanTheLimit) {
  std::string json = "{";
  for (size_t i = 0; i <= kMaxSafetensorsEntries; ++i) {
    absl::StrAppend(&json, i ? "," : "", "\"t", i, R"(":{"dtype":"F32","shape":[0],)",
                    R"("data_offsets":[0,0]})");
  }
  json += "}";
  EXPECT_TRUE(absl::StrContains(Refusal(json, 0),
                                absl::StrCat("more than ", kMaxSafetensorsEntries, " entries")));
}

TEST(SafetensorsHeaderTest, EchoesALongNameCut) {
  const std::string name(100000, 'n');
  const std::string message =
      Refusal(absl::StrCat(R"({")", name, R"(":{"dtype":7,"shape":[0],"data_offsets":[0,0]}})"), 0);
  EXPECT_LT(message.size(), 1000u);
  EXPECT_TRUE(absl::StrContains(message, "(100000 bytes)")) << message;
}

}  // namespace
}  // namespace shardwise
