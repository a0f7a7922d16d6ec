#include "contracts/job_spec_io.h"

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
  auto spec =
      ParseJobSpec(R"({"worldSize": 2, "globalBatchSize": 8, "model": {"layerWidths": [2, 2]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->world_size(), 2);
  EXPECT_EQ(spec->global_batch_size(), 8);
}

// YAML reads ".001", "+10", "007" and "1." as numbers; JSON writes them otherwise, and
// protobuf's JSON parser would refuse them as they stand.
TEST(ParseJobSpec, ReadsYamlNumbersJsonWritesOtherwise) {
  auto spec = ParseJobSpec(
      "optimizer: {adamw: {lr: .001, weight_decay: 1.}}\nsteps: +10\nworld_size: 007\n"
      "global_batch_size: 8\nmodel: {layer_widths: [2, 2]}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->optimizer().adamw().lr(), 0.001);
  EXPECT_DOUBLE_EQ(spec->optimizer().adamw().weight_decay(), 1.0);
  EXPECT_EQ(spec->steps(), 10);
  EXPECT_EQ(spec->world_size(), 7);
  auto negative = ParseJobSpec("optimizer: {sgd: {lr: -.5}}\n");
  ASSERT_TRUE(negative.ok()) << negative.status();
  EXPECT_DOUBLE_EQ(negative->optimizer().sgd().lr(), -0.5);
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

// A document after `---` would be ignored: refused, naming how many there are. One with a
// document start marker is one document.
TEST(ParseJobSpec, RefusesASecondDocument) {
  auto two = ParseJobSpec("steps: 1\n---\nsteps: 2\n");
  ASSERT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(two.status().message(),
            "job spec holds more than one YAML document (separated by ---); a spec is one");
  // yaml-cpp's LoadAll never returned on this stream (found by tests/fuzz/run.sh).
  EXPECT_EQ(ParseJobSpec("# a comment\n,\n# another\n").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto one = ParseJobSpec("---\nsteps: 3\n");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->steps(), 3);
  EXPECT_EQ(ParseJobSpec("").status().message(),
            "job spec must be a mapping of fields (see docs/job-spec.md)");
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

// A key given twice is refused, also when its two spellings name one field.
TEST(ParseJobSpec, RefusesAFieldGivenTwice) {
  auto spec = ParseJobSpec("name: a\nsteps: 3\nname: b\n");
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find("line 3: field 'name' is given twice"), std::string::npos)
      << spec.status();
  auto camel = ParseJobSpec("global_batch_size: 8\nglobalBatchSize: 16\n");
  EXPECT_NE(camel.status().message().find("field 'globalBatchSize' is given twice"),
            std::string::npos)
      << camel.status();
  EXPECT_EQ(ParseJobSpec(R"({"steps": 3, "steps": 4})").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A few hundred bytes of aliases would expand to gigabytes; nesting could exhaust the
// stack; a huge document costs memory. Each is refused, quickly.
TEST(ParseJobSpec, BoundsExpansionNestingAndSize) {
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'k'; ++c) {
    const char previous = static_cast<char>(c - 1);
    laughs += std::string(1, c) + ": &" + c + " [*" + previous + ", *" + previous + ", *" +
              previous + ", *" + previous + ", *" + previous + ", *" + previous + ", *" + previous +
              ", *" + previous + ", *" + previous + ", *" + previous + "]\n";
  }
  auto expanded = ParseJobSpec(laughs);
  EXPECT_EQ(expanded.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(expanded.status().message().find("expands to more than"), std::string::npos)
      << expanded.status();
  auto deep = ParseJobSpec("name: " + std::string(500, '[') + std::string(500, ']') + "\n");
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument) << deep.status();
  // 64 levels (the root mapping, then 63 lists) are read; 65 are not.
  auto levels = [](int lists) {
    return ParseJobSpec("name: " + std::string(lists, '[') + std::string(lists, ']') + "\n")
        .status();
  };
  // 64 levels are read: what stops them is that a name is no list, not the nesting.
  EXPECT_NE(levels(63).message().find("name"), std::string::npos) << levels(63);
  EXPECT_EQ(levels(63).message().find("nested deeper"), std::string::npos) << levels(63);
  EXPECT_NE(levels(64).message().find("nested deeper than 64 levels"), std::string::npos)
      << levels(64);
  auto huge = ParseJobSpec("name: x\n" + std::string(2 << 20, '#'));
  EXPECT_NE(huge.status().message().find("at most 1048576"), std::string::npos) << huge.status();
}

TEST(ReadJobSpecFile, RefusesWhatIsNotARegularFile) {
  EXPECT_EQ(ReadJobSpecFile("/dev/zero").status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(ReadJobSpecFile("/dev/zero").status().message().find("not a regular file"),
            std::string::npos);
}

}  // namespace
}  // namespace shardwise
