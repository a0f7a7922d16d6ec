#include "common/command_line_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
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

// absl's usage flags pass, and the line asks for help; the rest of the line is still
// checked (a mistake there is named, not left to absl).
TEST(CommandLineFlags, UsageFlagsAskForHelp) {
  for (const char* own : {"--help", "-help", "--helpfull", "--helpshort"}) {
    EXPECT_EQ(Check({"watch", own}), "ok") << own;
    EXPECT_TRUE(AsksForHelp({"watch", own})) << own;
    EXPECT_EQ(Check({"watch", own, "--later_mistake"}),
              "--later_mistake: no such flag (--help lists them)");
  }
  EXPECT_FALSE(AsksForHelp({"watch", "job-1", "--count=1"}));
  EXPECT_FALSE(AsksForHelp({"watch", "--", "--help"}));  // positional after "--"
}

// Flags that bring flags from a file or the environment, or excuse unknown ones, would
// bring them past these checks: `get workers --flagfile=F` with --submitter in F listed
// every worker.
TEST(CommandLineFlags, FlagsThatBringOtherFlagsAreRefused) {
  for (const char* name : {"flagfile", "fromenv", "tryfromenv", "undefok", "version"}) {
    EXPECT_EQ(
        Check({"get", "workers", absl::StrCat("--", name, "=x")}),
        absl::StrCat("--", name, ": not taken here; give each flag on the command line itself"));
  }
}

TEST(CommandLineFlags, FlagsAreDescribedWithTheirDefaults) {
  const std::string text = DescribeFlags("common/command_line_flags_test.cc");
  EXPECT_EQ(text,
            "  --count (default 0)\n      a number\n"
            "  --loud (default false)\n      a switch\n"
            "  --name\n      a word\n");
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
            "--coordinatr: no such flag (--help lists them)");
  EXPECT_EQ(Check({"--nocount"}), "--nocount: no such flag (--help lists them)");
  EXPECT_EQ(Check({"--noloud=1"}), "--noloud takes no value");
  EXPECT_EQ(Check({"job-1", "--name"}), "--name needs a value");
  const std::string bad = Check({"--count=two"});
  EXPECT_EQ(bad.rfind("--count: ", 0), 0u) << bad;
  EXPECT_NE(bad.find("two"), std::string::npos) << bad;
}

TEST(CommandLineFlags, ANumberBelowItsFloorIsRefusedNamingTheFlag) {
  EXPECT_TRUE(CheckFlagAtLeast("max_workers", 1, 1).ok());
  const absl::Status low = CheckFlagAtLeast("max_sync_threads", 2, 4);
  EXPECT_EQ(low.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(low.message(), "--max_sync_threads must be >= 4, got 2");
  EXPECT_EQ(CheckFlagAtLeast("quarantine_ms", -1, 0).message(),
            "--quarantine_ms must be >= 0, got -1");
}

}  // namespace
}  // namespace shardwise
