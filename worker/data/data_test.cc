#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/data/dataset.h"
#include "worker/data/weights.h"

namespace shardwise {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

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
  std::vector<float> x(size_t{6} * 4, 0.5f);
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
