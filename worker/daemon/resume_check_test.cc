#include "worker/daemon/resume_check.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "common/path_policy.h"
#include "common/testing/scratch.h"
#include "contracts/permanent_failure.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

const JobIdentity kJob{"job-1", "0123456789abcdef"};

std::string Folder(const std::string& name) {
  std::string dir = testing::ScratchPath("resume-check-") + name;
  std::filesystem::remove_all(dir);
  return dir;
}

// A step folder whose manifest names `job_id` and lists a shard file that is not there.
void WriteStepWithoutItsShard(const std::string& dir, int step, const std::string& job_id) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  const std::string folder = dir + "/" + name;
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/manifest.json")
      << "{\"job_id\": \"" << job_id << "\", \"job_uid\": \"" << kJob.uid
      << "\", \"attempt\": 1, \"step\": " << step
      << ", \"shard_group_size\": 1, \"world_size\": 1, \"files\": [\"rank-00000.safetensors\"]}";
}

void ExpectBlamedOnTheHost(const absl::Status& checked) {
  EXPECT_EQ(checked.code(), absl::StatusCode::kUnavailable) << checked;
  EXPECT_TRUE(IsMissingInput(checked)) << checked;
  EXPECT_FALSE(IsPermanent(checked)) << checked;  // retried where no rank finds them
  EXPECT_TRUE(absl::StrContains(checked.message(), "but the job wrote its checkpoint of step 40"))
      << checked;
}

// The folder not there, or there without the job's checkpoints (an empty mount point, a
// folder holding another job's): the job's input is missing on this host.
TEST(ResumeCheck, AFolderWithoutTheJobsCheckpointsIsAMissingInput) {
  const std::string dir = Folder("missing");
  ExpectBlamedOnTheHost(CheckTheJobsCheckpointsAreHere(dir, kJob, 40));
  std::filesystem::create_directories(dir);
  ExpectBlamedOnTheHost(CheckTheJobsCheckpointsAreHere(dir, kJob, 40));
  WriteStepWithoutItsShard(dir, 40, "job-other");
  ExpectBlamedOnTheHost(CheckTheJobsCheckpointsAreHere(dir, kJob, 40));
}

// A step of the job's that is damaged is the trainer's to pass over (or fail the job
// for), not this host's lack.
TEST(ResumeCheck, ADamagedStepOfTheJobsIsLeftToTheTrainer) {
  const std::string dir = Folder("damaged");
  WriteStepWithoutItsShard(dir, 40, kJob.id);
  EXPECT_TRUE(CheckTheJobsCheckpointsAreHere(dir, kJob, 40).ok());
}

}  // namespace
}  // namespace shardwise
