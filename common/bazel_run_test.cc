#include "common/bazel_run.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/match.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string WorkingDirectory() { return std::filesystem::current_path().string(); }

TEST(BazelRunTest, EntersTheFolderBazelRunNames) {
  const std::string before = WorkingDirectory();
  const std::string target = std::filesystem::canonical(testing::ScratchRoot()).string();
  ::setenv("BUILD_WORKING_DIRECTORY", target.c_str(), 1);
  const absl::Status status = EnterBazelRunWorkingDirectory();
  const std::string after = WorkingDirectory();
  ::unsetenv("BUILD_WORKING_DIRECTORY");
  ::chdir(before.c_str());
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(after, target);
}

TEST(BazelRunTest, StaysWhereItIsOutsideBazelRun) {
  const std::string before = WorkingDirectory();
  ::unsetenv("BUILD_WORKING_DIRECTORY");
  ASSERT_TRUE(EnterBazelRunWorkingDirectory().ok());
  EXPECT_EQ(WorkingDirectory(), before);
}

TEST(BazelRunTest, AFolderThatCannotBeEnteredIsNamed) {
  const std::string before = WorkingDirectory();
  ::setenv("BUILD_WORKING_DIRECTORY", "/nonexistent/folder", 1);
  const absl::Status status = EnterBazelRunWorkingDirectory();
  ::unsetenv("BUILD_WORKING_DIRECTORY");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "'/nonexistent/folder'")) << status;
  EXPECT_EQ(WorkingDirectory(), before);
}

}  // namespace
}  // namespace shardwise
