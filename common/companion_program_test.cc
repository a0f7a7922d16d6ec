#include "common/companion_program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string MakeDir(const std::string& name) {
  std::string dir = testing::ScratchPath(name);
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

// Sets and unsets environment variables for one test, and puts them back after it.
class ScopedEnvironment {
 public:
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value.has_value()) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::string& value) {
    Save(name);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  void Unset(const std::string& name) {
    Save(name);
    ::unsetenv(name.c_str());
  }

 private:
  void Save(const std::string& name) {
    if (saved_.count(name) != 0) return;
    const char* value = std::getenv(name.c_str());
    saved_[name] = value ? std::optional<std::string>(value) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

// Relative to the workspace, in this test's runfiles (its data).
constexpr char kPrintsRunfiles[] = "common/testdata/print_runfiles_dir.sh";

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir ? srcdir : ".", "/shardwise/", path);
}

void WriteFile(const std::string& path, int mode) {
  std::ofstream(path) << "#!/bin/sh\n";
  ::chmod(path.c_str(), mode);
}

TEST(CompanionProgramTest, FindsAnExecutableOnPathAndSkipsAFileThatIsNotOne) {
  ScopedEnvironment environment;
  const std::string plain = MakeDir("plain"), executable = MakeDir("executable");
  WriteFile(plain + "/shardwise-companion", 0644);
  WriteFile(executable + "/shardwise-companion", 0755);
  environment.Set("PATH", absl::StrCat(plain, ":", executable));

  auto found = FindCompanionProgram("shardwise-companion", "nowhere/shardwise-companion");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, executable + "/shardwise-companion");
  EXPECT_EQ(found->runfiles_dir, "");
}

// How a test finds the programs its data brings: in its own runfiles, which the programs
// it runs inherit through the environment.
TEST(CompanionProgramTest, FindsAProgramInTheRunfilesOfTheTestThatRunsIt) {
  ScopedEnvironment environment;
  const std::string runfiles = MakeDir("runfiles");
  MakeDir("runfiles/shardwise");
  MakeDir("runfiles/shardwise/tools");
  WriteFile(runfiles + "/shardwise/tools/shardwise-companion", 0755);
  environment.Set("PATH", MakeDir("elsewhere"));
  environment.Set("RUNFILES_DIR", runfiles);

  auto found = FindCompanionProgram("shardwise-companion", "tools/shardwise-companion");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, runfiles + "/shardwise/tools/shardwise-companion");
  EXPECT_EQ(found->runfiles_dir, runfiles);
}

// How a chain of companions started from bazel-bin finds its programs (the CLI runs the
// sampler, the sampler the tokenizer): a program found in this program's own runfiles tree
// is handed that tree, in place of whatever $RUNFILES_DIR said, since its own tree exists
// only when Bazel built it as a target of its own.
TEST(CompanionProgramTest, AProgramFoundInThisProgramsRunfilesIsHandedThem) {
  ScopedEnvironment environment;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  environment.Unset("TEST_SRCDIR");
  environment.Set("RUNFILES_DIR", MakeDir("stale-runfiles"));
  environment.Set("PATH", MakeDir("elsewhere"));

  auto found = FindCompanionProgram("print_runfiles_dir.sh", kPrintsRunfiles);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->path, absl::StrCat(self, ".runfiles/shardwise/", kPrintsRunfiles));
  EXPECT_EQ(found->runfiles_dir, self + ".runfiles");
  auto printed = RunAndCapture(*found, {"print_runfiles_dir.sh"});
  ASSERT_TRUE(printed.ok()) << printed.status();
  EXPECT_EQ(*printed, self + ".runfiles");
}

// Beside this program (the bundle's bin/) or on PATH no tree is involved: the environment
// passes as it is.
TEST(CompanionProgramTest, AProgramFoundOnPathGetsTheEnvironmentAsItIs) {
  ScopedEnvironment environment;
  const std::string dir = MakeDir("on-path");
  std::filesystem::copy_file(Runfile(kPrintsRunfiles), dir + "/print_runfiles_dir.sh",
                             std::filesystem::copy_options::overwrite_existing);
  environment.Unset("TEST_SRCDIR");
  environment.Unset("RUNFILES_DIR");
  environment.Set("PATH", dir);

  auto found = FindCompanionProgram("print_runfiles_dir.sh", "nowhere/print_runfiles_dir.sh");
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->runfiles_dir, "");
  auto printed = RunAndCapture(*found, {"print_runfiles_dir.sh"});
  ASSERT_TRUE(printed.ok()) << printed.status();
  EXPECT_EQ(*printed, "unset");
}

TEST(CompanionProgramTest, NotFoundNamesEveryPlaceLookedIn) {
  ScopedEnvironment environment;
  const std::string empty = MakeDir("empty");
  environment.Set("PATH", empty);

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
  absl::Status status = ExecProgram({dir + "/not-executable", ""}, {"not-executable"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(status.message(), "Permission denied")) << status;
}

}  // namespace
}  // namespace shardwise
