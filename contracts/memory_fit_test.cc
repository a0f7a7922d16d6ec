#include "contracts/memory_fit.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_io.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A small GPT at world 2 with two micro-steps per step, as a user writes it.
v1::JobSpec Gpt(v1::GptConfig::Attention attention) {
  auto spec = ParseJobSpec(absl::StrCat(R"(
    model: {gpt: {vocab_size: 256, block_size: 128, n_layer: 4, n_head: 4, n_embd: 256,
                  attention: )",
                                        v1::GptConfig::Attention_Name(attention), R"(}}
    optimizer: {adamw: {lr: 0.001}}
    data: {tokens: {train_path: /data/train.bin}}
    global_batch_size: 16
    gradient_accumulation_steps: 2
    steps: 1
    world_size: 2)"));
  EXPECT_TRUE(spec.ok()) << spec.status();
  ApplyJobSpecDefaults(&*spec);
  return *spec;
}

constexpr int64_t kBudget = int64_t{256} << 20;
constexpr int64_t kMax = int64_t{1} << 20;

int64_t TotalAt(const v1::JobSpec& spec) { return EstimateRankMemory(spec)->total(); }

// The answer fits and one more does not.
TEST(LargestFitting, FindsTheLargestMicroBatchThatFits) {
  const v1::JobSpec spec = Gpt(v1::GptConfig::MATERIALIZED);
  auto fit = LargestFitting(spec, FitDimension::kMicroBatch, kBudget, kMax);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->value, 1);
  EXPECT_EQ(fit->spec.global_batch_size(), fit->value * 2 * 2);
  EXPECT_LE(fit->estimate.total(), kBudget);
  EXPECT_EQ(fit->estimate.total(), TotalAt(fit->spec));
  v1::JobSpec one_more = fit->spec;
  one_more.set_global_batch_size((fit->value + 1) * 4);
  EXPECT_GT(TotalAt(one_more), kBudget);
}

// FUSED attention's memory is linear in the context, MATERIALIZED's quadratic: at the
// same budget the fused job fits a longer one.
TEST(LargestFitting, FusedAttentionFitsALongerContext) {
  int64_t longest[2] = {0, 0};
  int k = 0;
  for (auto attention : {v1::GptConfig::MATERIALIZED, v1::GptConfig::FUSED}) {
    const v1::JobSpec spec = Gpt(attention);
    auto fit = LargestFitting(spec, FitDimension::kBlockSize, kBudget, kMax);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_LE(fit->estimate.total(), kBudget);
    v1::JobSpec one_more = fit->spec;
    one_more.mutable_model()->mutable_gpt()->set_block_size(fit->value + 1);
    EXPECT_GT(TotalAt(one_more), kBudget);
    longest[k++] = fit->value;
  }
  // Here 788 and 1078 tokens: at this width (256) the 16 C floats a block keeps per token
  // weigh as much as 64 tokens of probabilities.
  EXPECT_GT(longest[1], longest[0] * 5 / 4) << longest[0] << " vs " << longest[1];
}

// A Llama's context stops at the positions it is made for, however much memory there is.
TEST(LargestFitting, ALlamasContextStopsAtItsPositions) {
  auto spec = ParseJobSpec(R"(
    model: {llama: {vocab_size: 256, hidden_size: 64, intermediate_size: 128,
                    num_hidden_layers: 2, num_attention_heads: 4, max_position_embeddings: 300}}
    optimizer: {adamw: {lr: 0.001}}
    data: {tokens: {train_path: /data/train.bin}}
    global_batch_size: 2
    steps: 1
    world_size: 1)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ApplyJobSpecDefaults(&*spec);
  auto fit = LargestFitting(*spec, FitDimension::kBlockSize, int64_t{1} << 40, kMax);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->value, 300);
}

TEST(LargestFitting, StopsAtTheLimit) {
  auto fit =
      LargestFitting(Gpt(v1::GptConfig::FUSED), FitDimension::kMicroBatch, int64_t{1} << 50, 100);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->value, 100);
}

TEST(LargestFitting, SaysWhenNothingFitsAndRefusesAContextForAnMlp) {
  auto none =
      LargestFitting(Gpt(v1::GptConfig::MATERIALIZED), FitDimension::kBlockSize, 1 << 20, kMax);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(none.status().message().find("a context of one token does not fit 1.0 MiB"),
            std::string::npos)
      << none.status();
  v1::JobSpec mlp;
  mlp.mutable_model()->add_layer_widths(4);
  mlp.mutable_model()->add_layer_widths(2);
  EXPECT_EQ(LargestFitting(mlp, FitDimension::kBlockSize, kBudget, kMax).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The search's bounds: a limit below 1 is refused; the largest one neither overflows a
// probe nor global_batch_size (value x 4 micro-batches per step here).
TEST(LargestFitting, RefusesAnEmptyRangeAndNeverOverflows) {
  const v1::JobSpec spec = Gpt(v1::GptConfig::FUSED);
  EXPECT_EQ(LargestFitting(spec, FitDimension::kMicroBatch, kBudget, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  const int64_t max = std::numeric_limits<int64_t>::max();
  auto fit = LargestFitting(spec, FitDimension::kMicroBatch, max - 1, max);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->spec.global_batch_size(), 0);
  EXPECT_LE(fit->value, max / 4);
  EXPECT_LE(fit->estimate.total(), max - 1);
}

TEST(ParseByteSize, TakesBinaryDecimalAndKubernetesUnits) {
  EXPECT_EQ(*ParseByteSize("80GiB"), int64_t{80} << 30);
  EXPECT_EQ(*ParseByteSize("80 Gi"), int64_t{80} << 30);
  EXPECT_EQ(*ParseByteSize("512mib"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("1.5TB"), int64_t{1500000000000});
  EXPECT_EQ(*ParseByteSize("4.1GB"), int64_t{4100000000});  // 4.1 * 1e9 is just below
  EXPECT_EQ(*ParseByteSize("8.2MB"), 8200000);
  EXPECT_EQ(*ParseByteSize("2k"), 2000);
  EXPECT_EQ(*ParseByteSize("1000000"), 1000000);
  EXPECT_EQ(*ParseByteSize("12B"), 12);
}

TEST(ParseByteSize, RefusesWhatIsNotASize) {
  for (const char* text : {"", "GiB", "-1GiB", "0", "eighty", "1e30TiB", "nanGiB", "80 GiBs"}) {
    auto size = ParseByteSize(text);
    EXPECT_EQ(size.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(size.status().message().find(absl::StrCat("'", text, "'")), std::string::npos)
        << size.status();
  }
}

}  // namespace
}  // namespace shardwise
