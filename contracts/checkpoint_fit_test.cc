#include "contracts/checkpoint_fit.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "contracts/checkpoint_files.h"
#include "gtest/gtest.h"

namespace shardwise::fsdp {
namespace {

v1::JobSpec Mlp() {
  v1::JobSpec spec;
  for (int w : {8, 16, 4}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_model()->set_bias(true);
  spec.mutable_wrap()->set_layers_per_unit(1);
  return spec;
}

// The manifest a shard group of `group` ranks writes for `spec`.
v1::CheckpointManifest ManifestOf(const v1::JobSpec& spec, const FlatLayout& layout, int group) {
  v1::CheckpointManifest manifest;
  *manifest.mutable_model() = spec.model();
  *manifest.mutable_wrap() = spec.wrap();
  manifest.set_shard_group_size(group);
  for (int s = 0; s < group; ++s) manifest.add_files(CheckpointShardFile(s));
  for (const UnitLayout& unit : layout.units) {
    auto* listed = manifest.add_units();
    listed->set_numel(unit.numel);
    listed->set_padded_numel(PaddedNumel(unit.numel, group));
  }
  return manifest;
}

class CheckpointFit : public ::testing::Test {
 protected:
  void SetUp() override {
    auto built = BuildFlatLayout(spec_.model(), spec_.wrap());
    ASSERT_TRUE(built.ok()) << built.status();
    layout_ = *built;
    manifest_ = ManifestOf(spec_, layout_, 3);
  }

  absl::Status Fit() const {
    return CheckCheckpointFits("/c/step-00000002", manifest_, spec_, layout_);
  }

  v1::JobSpec spec_ = Mlp();
  FlatLayout layout_;
  v1::CheckpointManifest manifest_;
};

TEST_F(CheckpointFit, TheWritersManifestFits) { EXPECT_TRUE(Fit().ok()) << Fit(); }

// Another model is named by what differs, so a user sees which checkpoint it is.
TEST_F(CheckpointFit, AnotherModelIsNamedByItsDifferences) {
  manifest_.mutable_model()->set_layer_widths(1, 32);
  EXPECT_EQ(Fit().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Fit().message(),
            "checkpoint '/c/step-00000002' holds another model than job.model (from the "
            "checkpoint's to the job's: modified: layer_widths[1]: 32 -> 16)");
}

TEST_F(CheckpointFit, AnotherWrapPolicyIsNamed) {
  manifest_.mutable_wrap()->set_layers_per_unit(2);
  EXPECT_EQ(Fit().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Fit().message().find("holds another wrap than job.wrap (from the checkpoint's to "
                                 "the job's: modified: layers_per_unit: 2 -> 1)"),
            std::string::npos)
      << Fit();
}

// A crafted manifest cannot name files outside the step folder.
TEST_F(CheckpointFit, OnlyTheWritersShardFileNamesAreRead) {
  manifest_.set_files(1, "../other-job/rank-00001.safetensors");
  EXPECT_EQ(Fit().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(Fit().message().find("shard file 1 is named '../other-job/rank-00001.safetensors', "
                                 "expected 'rank-00001.safetensors'"),
            std::string::npos)
      << Fit();
  manifest_.add_files(CheckpointShardFile(3));
  EXPECT_NE(Fit().message().find("lists 4 shard files for a shard group of 3"), std::string::npos)
      << Fit();
}

TEST_F(CheckpointFit, UnitsOfOtherSizesAreDamage) {
  manifest_.mutable_units(1)->set_numel(manifest_.units(1).numel() + 1);
  EXPECT_EQ(Fit().code(), absl::StatusCode::kDataLoss);
  manifest_ = ManifestOf(spec_, layout_, 3);
  manifest_.add_units()->set_numel(5);
  EXPECT_EQ(Fit().code(), absl::StatusCode::kDataLoss);
  const size_t units = layout_.units.size();  // the root unit's too
  EXPECT_NE(Fit().message().find(
                absl::StrCat("the manifest lists ", units + 1, " units, the model has ", units)),
            std::string::npos)
      << Fit();
}

}  // namespace
}  // namespace shardwise::fsdp
