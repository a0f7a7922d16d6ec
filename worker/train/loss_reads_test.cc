// A job that reads its losses every few steps (job.loss_read_interval_steps) trains the
// same model and reports the same losses as one that reads them every step, only later:
// each rank a thread running the real trainer over real Gloo (testing::TrainInThreads).

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise {
namespace {

std::string TempDir(const std::string& name) {
  std::string dir = testing::ScratchPath(name);
  std::filesystem::create_directories(dir);
  return dir;
}

// A small GPT on `world` ranks with two micro-steps per step.
v1::JobSpec GptSpec(const std::string& dir, int read_interval, int world = 2) {
  v1::JobSpec spec;
  *spec.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  v1::TokenData* tokens = spec.mutable_data()->mutable_tokens();
  tokens->set_train_path(testing::WriteLearnableTokens(dir + "/train.bin", 4000, 1));
  tokens->set_seed(7);
  spec.set_global_batch_size(int64_t{4} * world);
  spec.set_gradient_accumulation_steps(2);
  spec.set_steps(10);
  spec.set_world_size(world);
  spec.set_loss_read_interval_steps(read_interval);
  spec.mutable_output()->set_final_model_path(
      absl::StrCat(dir, "/model-", world, "-", read_interval, ".safetensors"));
  return spec;
}

// On two and three ranks: a sum of three floats depends on the order of its terms, which
// the reads keep (each step's loss is reduced as the first element of its own
// all-reduce, as a read every step does).
class LossReadsTest : public ::testing::TestWithParam<int> {};

TEST_P(LossReadsTest, EveryFourStepsGiveEveryStepsLossesLaterAndTheSameModel) {
  const int world = GetParam();
  const std::string dir = TempDir(absl::StrCat("loss-reads-", world));
  const v1::JobSpec every = GptSpec(dir, 1, world);
  const v1::JobSpec fourth = GptSpec(dir, 4, world);
  auto each_step = testing::TrainInThreads(every);
  ASSERT_TRUE(each_step.ok()) << each_step.status();
  auto batched = testing::TrainInThreads(fourth);
  ASSERT_TRUE(batched.ok()) << batched.status();

  // Reading every step: each step's own loss.
  const std::vector<double>& losses = each_step->rank0_losses;
  ASSERT_EQ(losses.size(), 10u);
  for (int s = 0; s < 10; ++s) EXPECT_EQ(each_step->rank0_loss_steps[s], s + 1);
  EXPECT_LT(losses.back(), losses.front()) << "the job did not train";

  // Every fourth step and the last: the same values, bit for bit.
  const std::vector<int64_t> want_steps = {0, 0, 0, 4, 4, 4, 4, 8, 8, 10};
  ASSERT_EQ(batched->rank0_loss_steps, want_steps);
  for (int s = 0; s < 10; ++s) {
    const int64_t measured = batched->rank0_loss_steps[s];
    if (measured > 0) {
      EXPECT_EQ(batched->rank0_losses[s], losses[measured - 1]) << "step " << s;
    }
  }
  EXPECT_EQ(batched->rank0.first_loss, each_step->rank0.first_loss);
  EXPECT_EQ(batched->rank0.last_loss, each_step->rank0.last_loss);

  auto a = ReadSafetensors(every.output().final_model_path());
  auto b = ReadSafetensors(fourth.output().final_model_path());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(testing::ModelsClose(*b, *a, 0, 0)) << "the reads changed the training";
}

INSTANTIATE_TEST_SUITE_P(Worlds, LossReadsTest, ::testing::Values(2, 3));

TEST(LossReads, ACheckpointReadsTheLossesOfItsStepsFirst) {
  const std::string dir = TempDir("loss-reads-checkpoint");
  v1::JobSpec spec = GptSpec(dir, 4);
  spec.set_steps(7);
  spec.mutable_output()->set_checkpoint_interval_steps(3);
  spec.mutable_output()->set_checkpoint_dir(dir + "/checkpoints");
  auto run = testing::TrainInThreads(spec);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->rank0_loss_steps, (std::vector<int64_t>{0, 0, 3, 3, 3, 6, 7}));
  EXPECT_EQ(run->rank0.checkpoints_written, 2);
}

// An MLP whose learning rate makes the loss overflow within a few steps.
v1::JobSpec DivergingSpec(int read_interval) {
  v1::JobSpec spec;
  for (int64_t width : {8, 16, 4}) spec.mutable_model()->add_layer_widths(width);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(1e30);
  spec.mutable_data()->mutable_synthetic()->set_seed(3);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(64);
  spec.set_global_batch_size(8);
  spec.set_steps(40);
  spec.set_world_size(2);
  spec.set_loss_read_interval_steps(read_interval);
  return spec;
}

TEST(LossReads, ADivergenceIsFoundAtTheNextReadNamingTheStepItBegan) {
  auto every = testing::TrainInThreads(DivergingSpec(1));
  ASSERT_FALSE(every.ok());
  EXPECT_TRUE(absl::StrContains(every.status().message(), "training diverged: the loss of step "))
      << every.status();
  auto batched = testing::TrainInThreads(DivergingSpec(16));
  ASSERT_FALSE(batched.ok());
  EXPECT_EQ(batched.status(), every.status());
}

}  // namespace
}  // namespace shardwise
