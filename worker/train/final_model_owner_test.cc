// final_model_owner.h with the real trainer (ranks as threads over Gloo): a later
// attempt of the job that wrote the final model replaces it; another job is refused.

#include "worker/train/final_model_owner.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "contracts/permanent_failure.h"
#include "gtest/gtest.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise {
namespace {

v1::JobSpec GptSpec(const std::string& dir) {
  v1::JobSpec spec;
  *spec.mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path(
      testing::WriteLearnableTokens(dir + "/train.bin", 4000, 1));
  spec.set_global_batch_size(8);
  spec.set_steps(2);
  spec.set_world_size(2);
  spec.mutable_output()->set_final_model_path(dir + "/model.safetensors");
  return spec;
}

// An attempt re-queued after it finished while the coordinator was away replaces the
// model its job's earlier attempt wrote; another job's attempt is refused
// (ALREADY_EXISTS, as the coordinator refuses such a spec) and leaves the file alone, and
// fails for good: a restart would train again only to be refused the same way.
TEST(FinalModelOwner, AJobReplacesOnlyTheFinalModelItWrote) {
  const std::string dir = testing::ScratchPath("final-model-owner");
  std::filesystem::create_directories(dir);
  const v1::JobSpec spec = GptSpec(dir);
  const std::string& path = spec.output().final_model_path();
  testing::ThreadedOptions first;
  first.job_id = "job-7";
  first.job_uid = "7a7a7a7a";
  first.owns_outputs = false;
  ASSERT_TRUE(testing::TrainInThreads(spec, first).ok());
  const JobIdentity seven{"job-7", "7a7a7a7a"};
  EXPECT_TRUE(WrittenByJob(path, seven));
  EXPECT_FALSE(WrittenByJob(path, {"job-8", "7a7a7a7a"}));
  EXPECT_FALSE(WrittenByJob(path, {"job-7", "0b0b0b0b"}));  // another state file's job-7
  EXPECT_FALSE(WrittenByJob(path, {"job-7", ""}));          // a job-7 from before uids
  EXPECT_FALSE(WrittenByJob(path, JobIdentity()));
  testing::ThreadedOptions again = first;
  again.attempt = 2;
  const auto replaced = testing::TrainInThreads(spec, again);
  EXPECT_TRUE(replaced.ok()) << replaced.status();
  // Replaced: the file is attempt 2's now.
  EXPECT_EQ(ReadSafetensorsMetadata(path).value_or(Metadata{})[kFinalModelAttemptKey], "2");
  // Another job, and another coordinator's job-7 (a state file started over), in its
  // second attempt: neither replaces it.
  for (const JobIdentity& stranger :
       {JobIdentity{"job-8", "8b8b8b8b"}, JobIdentity{"job-7", "0b0b0b0b"}}) {
    testing::ThreadedOptions other = again;
    other.job_id = stranger.id;
    other.job_uid = stranger.uid;
    const auto refused = testing::TrainInThreads(spec, other);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
    EXPECT_TRUE(IsPermanent(refused.status())) << refused.status();
  }
  EXPECT_TRUE(WrittenByJob(path, seven));
  EXPECT_FALSE(WrittenByJob(dir + "/missing.safetensors", seven));
}

// A Hugging Face export's config.json put there while the job trained fails it for good
// at its end, before the weights are written (weights naming the job would have made the
// folder its own, and a restart would have replaced that config.json).
TEST(FinalModelOwner, AnExportFolderTakenMeanwhileFailsTheJobForGood) {
  const std::string dir = testing::ScratchPath("final-model-export-taken");
  std::filesystem::create_directories(dir + "/hf");
  v1::JobSpec spec = GptSpec(dir);
  spec.mutable_model()->mutable_gpt()->set_bias(true);
  spec.mutable_output()->set_huggingface_dir(dir + "/hf");
  std::ofstream(dir + "/hf/config.json") << "{}";
  testing::ThreadedOptions options;
  options.job_id = "job-9";
  options.job_uid = "9c9c9c9c";
  options.owns_outputs = false;
  const auto refused = testing::TrainInThreads(spec, options);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists) << refused.status();
  EXPECT_TRUE(IsPermanent(refused.status())) << refused.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/hf/model.safetensors"));
  std::ifstream config(dir + "/hf/config.json");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(config), {}), "{}");
}

// An attempt cut off from the coordinator, finishing after the job's later attempt wrote
// the model, does not replace it, even with output.overwrite (FAILED_PRECONDITION,
// superseded); the later attempt's model stays.
TEST(FinalModelOwner, ASupersededAttemptDoesNotReplaceALaterAttemptsModel) {
  const std::string dir = testing::ScratchPath("final-model-fenced");
  std::filesystem::create_directories(dir);
  v1::JobSpec spec = GptSpec(dir);
  spec.mutable_output()->set_overwrite(true);
  const std::string& path = spec.output().final_model_path();
  testing::ThreadedOptions later;
  later.job_id = "job-9";
  later.attempt = 3;
  later.owns_outputs = false;
  ASSERT_TRUE(testing::TrainInThreads(spec, later).ok());
  const auto written = std::filesystem::last_write_time(path);
  testing::ThreadedOptions stale = later;
  stale.attempt = 2;
  const auto refused = testing::TrainInThreads(spec, stale);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("this attempt (2) was superseded"), std::string::npos)
      << refused.status();
  EXPECT_EQ(std::filesystem::last_write_time(path), written);
  EXPECT_TRUE(CheckNotSuperseded(path, {"job-9", ""}, 3).ok());  // its own
  EXPECT_TRUE(
      CheckNotSuperseded(path, {"job-10", ""}, 1).ok());  // another job's: overwrite decides
  // Another state file's job-9 in its first attempt is not "superseded" by this one.
  EXPECT_TRUE(CheckNotSuperseded(path, {"job-9", "9c9c9c9c"}, 1).ok());
  EXPECT_EQ(WriterMetadata({"job-9", ""}, 3).at(kFinalModelAttemptKey), "3");
  EXPECT_EQ(WriterMetadata({"job-9", "9c9c9c9c"}, 3).at("shardwise.job_uid"), "9c9c9c9c");
  EXPECT_TRUE(WriterMetadata(JobIdentity(), 3).empty());
}

}  // namespace
}  // namespace shardwise
