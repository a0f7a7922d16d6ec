#include "common/companion_program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string MakeDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

void WriteFile(const std::string& path, int mode) {
  std::ofstream(path) << "#!/bin/sh\n";
  ::chmod(path.c_str(), mode);
}

TEST(CompanionProgramTest, FindsAnExecutableOnPathAndSkipsAFileThatIsNotOne) {
  const std::string plain = MakeDir("plain"), executable = MakeDir("executable");
  WriteFile(plain + "/shardwise-companion", 0644);
  WriteFile(executable + "/shardwise-companion", 0755);
  ::setenv("PATH", absl::StrCat(plain, ":", executable).c_str(), 1);

  auto found = FindCompanionProgram("shardwise-companion", "nowhere/shardwise-companion");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, executable + "/shardwise-companion");
}

// How a test finds the programs its data brings: in its own runfiles, which the programs
// it runs inherit through the environment.
TEST(CompanionProgramTest, FindsAProgramInTheRunfilesOfTheTestThatRunsIt) {
  const std::string runfiles = MakeDir("runfiles");
  MakeDir("runfiles/shardwise");
  MakeDir("runfiles/shardwise/tools");
  WriteFile(runfiles + "/shardwise/tools/shardwise-companion", 0755);
  ::setenv("PATH", MakeDir("elsewhere").c_str(), 1);
  ::setenv("RUNFILES_DIR", runfiles.c_str(), 1);

  auto found = FindCompanionProgram("shardwise-companion", "tools/shardwise-companion");
  ::unsetenv("RUNFILES_DIR");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, runfiles + "/shardwise/tools/shardwise-companion");
}

TEST(CompanionProgramTest, NotFoundNamesEveryPlaceLookedIn) {
  const std::string empty = MakeDir("empty");
  ::setenv("PATH", empty.c_str(), 1);

  auto found = FindCompanionProgram("shardwise-absent", "worker/tools/shardwise-absent");
  EXPECT_EQ(found.status().code(), absl::StatusCode::kNotFound);
  const std::string message(found.status().message());
  EXPECT_TRUE(absl::StrContains(message, empty + "/shardwise-absent")) << message;
  EXPECT_TRUE(absl::StrContains(message, ".runfiles/shardwise/worker/tools/shardwise-absent"))
      << message;
}

TEST(CompanionProgramTest, ExecOfAFileThatCannotRunReturnsAnError) {
  const std::string dir = MakeDir("cannot-run");
  WriteFile(dir + "/not-executable", 0644);
  absl::Status status = ExecProgram(dir + "/not-executable", {"not-executable"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(status.message(), "Permission denied")) << status;
}

}  // namespace
}  // namespace shardwise
