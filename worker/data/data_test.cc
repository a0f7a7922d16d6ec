#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "common/safetensors.h"
#include "worker/data/weights.h"

namespace shardwise {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name, "-", getpid());
}

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
  TensorMap tensors = SeededWeights([] {
    v1::ModelSpec m;
    for (int w : {3, 5, 2}) m.add_layer_widths(w);
    return m;
  }(), 9);
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

v1::JobSpec Spec() {
  v1::JobSpec spec;
  for (int w : {4, 8, 3}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_data()->mutable_synthetic()->set_seed(2);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(50);
  return spec;
}

TEST(Dataset, SyntheticIsDeterministicAndLabelsAreClasses) {
  auto a = LoadDataset(Spec());
  auto b = LoadDataset(Spec());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->x, b->x);
  EXPECT_EQ(a->labels, b->labels);
  ASSERT_EQ(a->labels.size(), 50u);
  for (int64_t label : a->labels) EXPECT_TRUE(label >= 0 && label < 3);
}

TEST(Dataset, ReadsAFileAndNamesWhatDoesNotFit) {
  const std::string path = TempPath("data.safetensors");
  std::vector<float> x(6 * 4, 0.5f);
  std::vector<int64_t> y = {0, 1, 2, 0, 1, 2};
  TensorMap tensors;
  tensors["x"] = F32Tensor({6, 4}, x.data());
  HostTensor labels;
  labels.dtype = "I64";
  labels.shape = {6};
  labels.bytes.assign(reinterpret_cast<const char*>(y.data()), y.size() * 8);
  tensors["y"] = labels;
  ASSERT_TRUE(WriteSafetensors(path, tensors).ok());
  v1::JobSpec spec = Spec();
  spec.mutable_data()->set_safetensors_path(path);
  auto data = LoadDataset(spec);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->num_samples, 6);
  EXPECT_EQ(data->labels[2], 2);

  spec.mutable_model()->set_layer_widths(0, 5);  // the file's x has 4 columns
  auto wrong = LoadDataset(spec);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("tensor 'x' is F32 [6, 4], expected F32 [N, 5]"),
            std::string::npos)
      << wrong.status();
}

TEST(SampleRows, RanksSplitTheGlobalBatchAndWrapAround) {
  // Global batch 8 over 2 ranks, 2 micro-steps; N = 10.
  EXPECT_EQ(SampleRows(0, 8, 2, 0, 0, 2, 10), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(SampleRows(0, 8, 2, 0, 1, 2, 10), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(SampleRows(0, 8, 2, 1, 0, 2, 10), (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(SampleRows(1, 8, 2, 0, 0, 1, 10), (std::vector<int64_t>{8, 9, 0, 1}));
}

TEST(Weights, SeededWeightsFollowPyTorchsBounds) {
  v1::ModelSpec model;
  for (int w : {16, 4}) model.add_layer_widths(w);
  TensorMap weights = SeededWeights(model, 1);
  const HostTensor& w = weights.at("0.weight");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{4, 16}));
  for (int64_t i = 0; i < w.numel(); ++i) EXPECT_LE(std::abs(w.f32()[i]), 0.25f);
  EXPECT_EQ(weights.at("0.bias").shape, (std::vector<int64_t>{4}));
}

}  // namespace
}  // namespace shardwise
