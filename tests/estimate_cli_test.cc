// `shardwise estimate`, the real CLI binary: one rank's memory for a job spec file, offline
// (its data files need not exist here), and with --fit the largest micro-batch and context
// that fit a device, as contracts/memory_fit.h computes them; bad input exits 2 naming it.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/job_spec_io.h"
#include "contracts/memory_fit.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise {
namespace {

using testing::Cluster;

constexpr char kGpt2[] = R"(name: gpt2
model:
  gpt: {vocab_size: 50304, block_size: 1024, n_layer: 12, n_head: 12, n_embd: 768, attention: FUSED}
fsdp: {mixed_precision: {param_dtype: BF16}}
optimizer: {adamw: {lr: 0.0006}}
data: {tokens: {train_path: /on/the/cluster/train.bin}}
global_batch_size: 16
gradient_accumulation_steps: 2
steps: 100
world_size: 2
device: CUDA
)";

std::string WriteSpec(const std::string& name, const std::string& text) {
  std::string path = testing::ScratchPath(absl::StrCat(name, ".yaml"));
  std::ofstream(path) << text;
  return path;
}

TEST(EstimateCli, PrintsOneRanksMemoryAndWhatFitsADevice) {
  const std::string path = WriteSpec("gpt2", kGpt2);
  std::string output;
  ASSERT_EQ(Cluster::RunCli({"estimate", path, "--fit=80GiB"}, &output), 0) << output;
  auto spec = ReadJobSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ApplyJobSpecDefaults(&*spec);
  auto estimate = EstimateRankMemory(*spec);
  ASSERT_TRUE(estimate.ok());
  EXPECT_NE(output.find(absl::StrCat("one rank: ", estimate->ToString(), "\n")), std::string::npos)
      << output;
  auto batch = LargestFitting(*spec, FitDimension::kMicroBatch, int64_t{80} << 30, 1 << 22);
  auto context = LargestFitting(*spec, FitDimension::kBlockSize, int64_t{80} << 30, 1 << 20);
  ASSERT_TRUE(batch.ok() && context.ok());
  EXPECT_NE(output.find(absl::StrCat("micro-batch: up to ", batch->value,
                                     " sequences per rank per micro-step (global_batch_size ",
                                     batch->value * 4, ")")),
            std::string::npos)
      << output;
  EXPECT_NE(output.find(absl::StrCat("context: up to block_size ", context->value, ":")),
            std::string::npos)
      << output;
}

// A coordinator's limits are its own: a world beyond the default limit of 1024 is
// estimated, as submit would send it. Nothing fitting exits 1.
TEST(EstimateCli, TakesWhatSubmitTakesAndFailsWhenNothingFits) {
  std::string large = kGpt2;
  large.replace(large.find("world_size: 2"), 13, "world_size: 2048");
  large.replace(large.find("global_batch_size: 16"), 21, "global_batch_size: 16384");
  std::string output;
  EXPECT_EQ(Cluster::RunCli({"estimate", WriteSpec("large", large)}, &output), 0) << output;
  EXPECT_NE(output.find("one rank: "), std::string::npos) << output;
  EXPECT_EQ(Cluster::RunCli({"estimate", WriteSpec("small", kGpt2), "--fit=1MiB"}, &output), 1);
  EXPECT_NE(output.find("micro-batch: a micro-batch of one does not fit 1.0 MiB"),
            std::string::npos)
      << output;
}

// The bounds no coordinator lifts hold in the CLI too, before it describes the model: a
// GPT of 2^31 - 1 layers is refused at once instead of filling the memory.
TEST(EstimateCli, RefusesWhatNoCoordinatorTakesBeforeBuildingAnything) {
  std::string layers = kGpt2;
  layers.replace(layers.find("n_layer: 12"), 11, "n_layer: 2147483647");
  std::string world = kGpt2;
  world.replace(world.find("world_size: 2"), 13, "world_size: 2147483647");
  std::string output;
  for (const auto& [name, spec] : {std::pair{"layers", layers}, std::pair{"world", world}}) {
    for (const char* verb : {"estimate", "submit"}) {
      // submit refuses before it connects: no coordinator listens at this address (estimate
      // never connects, and takes no --coordinator).
      std::vector<std::string> line = {verb, WriteSpec(name, spec)};
      if (verb == std::string("submit")) line.insert(line.begin(), "--coordinator=127.0.0.1:1");
      EXPECT_EQ(Cluster::RunCli(line, &output), 2) << verb << " " << name << ": " << output;
      EXPECT_NE(output.find(name == std::string("layers")
                                ? "job.model.gpt.n_layer: 2147483647 exceeds the limit of 1024"
                                : "job.world_size: 2147483647 exceeds any coordinator's largest "
                                  "limit of 1048576"),
                std::string::npos)
          << verb << " " << name << ": " << output;
    }
  }
}

TEST(EstimateCli, RefusesABadSizeAndABadSpecNamingThem) {
  std::string output;
  EXPECT_EQ(Cluster::RunCli({"estimate", WriteSpec("ok", kGpt2), "--fit=lots"}, &output), 2);
  EXPECT_NE(output.find("--fit: 'lots' is not a size"), std::string::npos) << output;
  std::string bad = kGpt2;
  bad.replace(bad.find("n_head: 12"), 10, "n_head: 7");
  EXPECT_EQ(Cluster::RunCli({"estimate", WriteSpec("bad", bad)}, &output), 2);
  EXPECT_NE(output.find("model.gpt.n_embd: 768 is not divisible by model.gpt.n_head 7"),
            std::string::npos)
      << output;
}

}  // namespace
}  // namespace shardwise
