#include "common/job_spec_io.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(ParseJobSpec, ReadsYamlWithEnumsNumbersAndBools) {
  auto spec = ParseJobSpec(R"(
name: demo
model:
  layer_widths: [16, 64, 4]
  activation: GELU
  bias: false
fsdp:
  sharding_strategy: HYBRID_SHARD
  shard_group_size: 2
  forward_prefetch: true
  mixed_precision: {param_dtype: BF16}
optimizer:
  adamw: {lr: 0.001, weight_decay: 0.0}
data:
  synthetic: {seed: 7}
global_batch_size: 64
steps: 100
world_size: 4
output:
  final_model_path: "/tmp/model.safetensors"
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "demo");
  ASSERT_EQ(spec->model().layer_widths_size(), 3);
  EXPECT_EQ(spec->model().layer_widths(1), 64);
  EXPECT_EQ(spec->model().activation(), v1::GELU);
  EXPECT_TRUE(spec->model().has_bias());
  EXPECT_FALSE(spec->model().bias());
  EXPECT_EQ(spec->fsdp().sharding_strategy(), v1::ShardingStrategy::HYBRID_SHARD);
  EXPECT_TRUE(spec->fsdp().forward_prefetch());
  EXPECT_EQ(spec->fsdp().mixed_precision().param_dtype(), v1::BF16);
  EXPECT_DOUBLE_EQ(spec->optimizer().adamw().lr(), 0.001);
  EXPECT_TRUE(spec->optimizer().adamw().has_weight_decay());
  EXPECT_EQ(spec->data().synthetic().seed(), 7u);
  EXPECT_EQ(spec->world_size(), 4);
  EXPECT_EQ(spec->output().final_model_path(), "/tmp/model.safetensors");
}

TEST(ParseJobSpec, ReadsJsonWithCamelCase) {
  auto spec = ParseJobSpec(R"({"worldSize": 2, "globalBatchSize": 8, "model": {"layerWidths": [2, 2]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->world_size(), 2);
  EXPECT_EQ(spec->global_batch_size(), 8);
}

TEST(ParseJobSpec, QuotedNumbersStayStrings) {
  auto spec = ParseJobSpec("name: \"123\"\nworld_size: 2\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "123");
}

TEST(ParseJobSpec, RejectsUnknownField) {
  auto spec = ParseJobSpec("world_size: 2\nwrold_size: 3\n");
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("wrold_size"), std::string::npos) << spec.status();
}

TEST(ParseJobSpec, RejectsUnknownEnumName) {
  auto spec = ParseJobSpec("fsdp: {sharding_strategy: FULLY_SHARDED}\n");
  ASSERT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("FULLY_SHARDED"), std::string::npos) << spec.status();
}

TEST(ParseJobSpec, RejectsMalformedYaml) {
  auto spec = ParseJobSpec("model: [1, 2\n");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  auto scalar = ParseJobSpec("just a string");
  EXPECT_EQ(scalar.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadJobSpecFile, MissingFileIsNotFound) {
  auto spec = ReadJobSpecFile("/definitely/not/here.yaml");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("/definitely/not/here.yaml"), std::string::npos);
}

TEST(JobSpecToJson, RoundTrips) {
  v1::JobSpec spec;
  spec.set_world_size(3);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  auto parsed = ParseJobSpec(JobSpecToJson(spec));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->SerializeAsString(), spec.SerializeAsString());
}

}  // namespace
}  // namespace shardwise
