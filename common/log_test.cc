#include "common/log.h"

#include <cstdlib>
#include <ctime>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace {

using ::testing::MatchesRegex;

std::vector<std::string> Lines(const std::ostringstream& out) {
  return absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
}

// The time a line carries, read back; spdlog stamps it, so the test brackets it.
absl::Time ParsedTime(const std::string& stamp) {
  absl::Time time;
  std::string error;
  EXPECT_TRUE(absl::ParseTime("%Y-%m-%dT%H:%M:%E3SZ", stamp, absl::UTCTimeZone(), &time, &error))
      << stamp << ": " << error;
  return time;
}

// Each test logs to a stream of its own; afterwards, lines go to stderr again.
class LogTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(ConfigureLogging("test", "text", "info").ok()); }
};

TEST_F(LogTest, TextLinesCarryTheTimeInUtcTheLevelTheComponentAndTheSubject) {
  // Another zone for the process: the line's time must still be UTC.
  ::setenv("TZ", "Asia/Tokyo", 1);
  ::tzset();
  std::ostringstream out;
  ASSERT_TRUE(ConfigureLogging("coordinator", "text", "info", &out).ok());
  const absl::Time before = absl::Now();
  LogWarning(LogContext().Job("job-1").Attempt(2).Rank(0).Worker("w0"), "lost: its session closed");
  LogInfo(LogContext(), "serving on port 5000\nand more");
  const absl::Time after = absl::Now();

  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_THAT(lines[0], MatchesRegex("[0-9-]{10}T[0-9:]{8}\\.[0-9]{3}Z warning coordinator "
                                     "job=job-1 attempt=2 rank=0 worker=w0: lost: its session "
                                     "closed"));
  const absl::Time stamped = ParsedTime(lines[0].substr(0, lines[0].find(' ')));
  EXPECT_GE(stamped, absl::FromUnixMillis(absl::ToUnixMillis(before)));  // stamped to the ms
  EXPECT_LE(stamped, after);
  // A line per event: the message's own line break is escaped.
  EXPECT_THAT(lines[1], MatchesRegex(".*Z info coordinator serving on port 5000\\\\nand more"));
}

TEST_F(LogTest, JsonLinesAreObjectsWithEveryFieldSetAndOnlyThose) {
  std::ostringstream out;
  ASSERT_TRUE(ConfigureLogging("worker", "json", "debug", &out).ok());
  LogError(LogContext().Job("job-\"7\"").Attempt(1).Worker("w1"),
           "a \"quoted\" path\n\tand invalid UTF-8: \xff\xfe");
  LogDebug(LogContext().Rank(3), "debug line");

  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out.str();
  const nlohmann::json first = nlohmann::json::parse(lines[0], nullptr, false);
  ASSERT_TRUE(first.is_object()) << lines[0];
  EXPECT_EQ(first["level"], "error");
  EXPECT_EQ(first["component"], "worker");
  EXPECT_EQ(first["job"], "job-\"7\"");
  EXPECT_EQ(first["attempt"], 1);
  EXPECT_EQ(first["worker"], "w1");
  EXPECT_FALSE(first.contains("rank"));
  EXPECT_EQ(first["message"], "a \"quoted\" path\n\tand invalid UTF-8: \xEF\xBF\xBD\xEF\xBF\xBD");
  ParsedTime(first["time"].get<std::string>());
  const nlohmann::json second = nlohmann::json::parse(lines[1], nullptr, false);
  ASSERT_TRUE(second.is_object()) << lines[1];
  EXPECT_EQ(second["rank"], 3);
  EXPECT_EQ(second["level"], "debug");
  EXPECT_FALSE(second.contains("job"));
}

TEST_F(LogTest, LinesBelowTheLevelAreNotWritten) {
  std::ostringstream out;
  ASSERT_TRUE(ConfigureLogging("coordinator", "text", "warning", &out).ok());
  LogDebug(LogContext(), "debug");
  LogInfo(LogContext(), "info");
  LogWarning(LogContext(), "warning");
  LogError(LogContext(), "error");
  const std::vector<std::string> lines = Lines(out);
  ASSERT_EQ(lines.size(), 2u) << out.str();
  EXPECT_THAT(lines[0], MatchesRegex(".* warning coordinator warning"));
  EXPECT_THAT(lines[1], MatchesRegex(".* error coordinator error"));
}

TEST_F(LogTest, AnUnknownFormatOrLevelIsRefusedNamingTheFlagAndTheValue) {
  absl::Status format = ConfigureLogging("coordinator", "xml", "info");
  EXPECT_EQ(format.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(format.message(), "--log_format: \"xml\" is neither text nor json");
  absl::Status level = ConfigureLogging("coordinator", "text", "verbose");
  EXPECT_EQ(level.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(level.message(), "--log_level: \"verbose\" is none of debug, info, warning and error");
}

}  // namespace
}  // namespace shardwise
