// Ranks that opened different token files (a host with a stale copy, a file rewritten as
// the ranks opened it) fail the attempt before its first step, naming the file, the ranks
// and what differs, where they would have trained on overlapping sequences without a
// word: each rank a thread running the real trainer over real Gloo
// (testing::TrainInThreads), each with its own view of the spec's files.

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise {
namespace {

class DataAgreementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::ScratchPath("data-agreement");
    std::filesystem::create_directories(dir_);
    *spec_.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
    spec_.mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
    spec_.mutable_data()->mutable_tokens()->set_train_path(
        testing::WriteLearnableTokens(dir_ + "/train.bin", 4000, 1));
    spec_.set_global_batch_size(4);
    spec_.set_steps(2);
    spec_.set_world_size(2);
  }
  // Rank 1 reads `copy` where the others read the job's file.
  absl::Status TrainWithRankOneReading(const std::string& copy) {
    testing::ThreadedOptions options;
    options.rank_spec = [&](int rank, v1::JobSpec* spec) {
      if (rank == 1) spec->mutable_data()->mutable_tokens()->set_train_path(copy);
    };
    return testing::TrainInThreads(spec_, options).status();
  }

  std::string dir_;
  v1::JobSpec spec_;
};

TEST_F(DataAgreementTest, ACopyOfTheSameIdsTrains) {
  EXPECT_TRUE(
      TrainWithRankOneReading(testing::WriteLearnableTokens(dir_ + "/same.bin", 4000, 1)).ok());
}

TEST_F(DataAgreementTest, ACopyOfAnotherLengthFailsTheAttemptNamingBoth) {
  const absl::Status status =
      TrainWithRankOneReading(testing::WriteLearnableTokens(dir_ + "/short.bin", 3000, 1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("the ranks opened different data: data.tokens.train_path "
                                  "holds 4000 tokens on rank 0 and 3000 on rank 1"),
            std::string::npos)
      << status;
}

TEST_F(DataAgreementTest, ACopyOfOtherIdsFailsTheAttempt) {
  const absl::Status status =
      TrainWithRankOneReading(testing::WriteLearnableTokens(dir_ + "/other.bin", 4000, 2));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("holds 4000 tokens on rank 0 and on rank 1, but not the same "
                                  "ones"),
            std::string::npos)
      << status;
}

}  // namespace
}  // namespace shardwise
