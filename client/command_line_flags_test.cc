#include "client/command_line_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "gtest/gtest.h"

ABSL_FLAG(int32_t, count, 0, "a number");
ABSL_FLAG(bool, loud, false, "a switch");
ABSL_FLAG(std::string, name, "", "a word");

namespace shardwise {
namespace {

std::string Check(const std::vector<std::string>& args) {
  const absl::Status status = CheckCommandLineFlags(args);
  return status.ok() ? "ok" : std::string(status.message());
}

TEST(CommandLineFlags, FlagsAbslReadsAreTakenAndSet) {
  EXPECT_EQ(Check({"watch", "job-1", "--count=3", "-loud", "--name", "a", "--", "--bogus"}), "ok");
  EXPECT_EQ(absl::GetFlag(FLAGS_count), 3);
  EXPECT_TRUE(absl::GetFlag(FLAGS_loud));
  EXPECT_EQ(absl::GetFlag(FLAGS_name), "a");
  EXPECT_EQ(Check({"--noloud", "-", "job-1"}), "ok");
  EXPECT_FALSE(absl::GetFlag(FLAGS_loud));
  EXPECT_EQ(Check({"--loud=true"}), "ok");
  EXPECT_TRUE(absl::GetFlag(FLAGS_loud));
}

// absl's own flags, outside the registry, are absl's to handle, with the rest of the line.
TEST(CommandLineFlags, AbslsOwnFlagsAreLeftToIt) {
  for (const char* own : {"--help", "--helpfull", "--version", "--flagfile=f", "--undefok=x"}) {
    EXPECT_EQ(Check({"watch", own, "--later_mistake"}), "ok") << own;
  }
}

TEST(CommandLineFlags, TheFirstPositionalSkipsFlagsAndTheirValues) {
  EXPECT_EQ(FirstPositional({"watch", "--count=3"}), 0u);
  EXPECT_EQ(FirstPositional({"--name", "sample", "get", "jobs"}), 2u);  // the value is --name's
  EXPECT_EQ(FirstPositional({"--loud", "sample"}), 1u);                 // a bool takes none
  EXPECT_EQ(FirstPositional({"--noloud", "--count=1", "sample"}), 2u);
  EXPECT_EQ(FirstPositional({"--", "--count"}), 1u);
  EXPECT_EQ(FirstPositional({"--count", "3"}), std::nullopt);
  EXPECT_EQ(FirstPositional({}), std::nullopt);
}

TEST(CommandLineFlags, MistakesAreNamed) {
  EXPECT_EQ(Check({"watch", "job-1", "--coordinatr=h:1"}),
            "--coordinatr: no such flag (shardwise --help lists them)");
  EXPECT_EQ(Check({"--nocount"}), "--nocount: no such flag (shardwise --help lists them)");
  EXPECT_EQ(Check({"--noloud=1"}), "--noloud takes no value");
  EXPECT_EQ(Check({"job-1", "--name"}), "--name needs a value");
  const std::string bad = Check({"--count=two"});
  EXPECT_EQ(bad.rfind("--count: ", 0), 0u) << bad;
  EXPECT_NE(bad.find("two"), std::string::npos) << bad;
}

}  // namespace
}  // namespace shardwise
