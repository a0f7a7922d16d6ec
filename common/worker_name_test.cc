#include "common/worker_name.h"

#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(WorkerName, PrintableWithoutSpacesOrEquals) {
  EXPECT_TRUE(CheckWorkerName("name", "node7-gpu3").ok());
  EXPECT_EQ(CheckWorkerName("name", "x job=job-3").message(),
            "name: 'x job=job-3' holds a space or '='; a worker's name may hold neither");
  EXPECT_EQ(CheckWorkerName("name", std::string(257, 'w')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckWorkerName("name", "w\x1b[2J").code(), absl::StatusCode::kInvalidArgument);
}

TEST(WorkerName, APatternIsANameOrAPrefixEndingInAStar) {
  for (const char* good : {"node7-gpu3", "node7-*", "*"}) {
    EXPECT_TRUE(CheckWorkerNamePattern("worker_names", good).ok()) << good;
  }
  EXPECT_EQ(CheckWorkerNamePattern("worker_names", "").message(),
            "worker_names: an empty pattern (a name, or a prefix ending in '*')");
  EXPECT_EQ(CheckWorkerNamePattern("worker_names", "node*-gpu0").message(),
            "worker_names: 'node*-gpu0' has a '*' before its end (a name, or a prefix ending in "
            "'*')");
  EXPECT_EQ(CheckWorkerNamePattern("worker_names", "a b*").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(WorkerName, PatternsMatchWholeNamesOrPrefixes) {
  EXPECT_TRUE(WorkerNameMatches("node7-gpu3", "node7-gpu3"));
  EXPECT_FALSE(WorkerNameMatches("node7-gpu3", "node7-gpu30"));  // a name is whole
  EXPECT_TRUE(WorkerNameMatches("node7-*", "node7-gpu30"));
  EXPECT_TRUE(WorkerNameMatches("node7-*", "node7-"));
  EXPECT_FALSE(WorkerNameMatches("node7-*", "node70-gpu0"));
  EXPECT_TRUE(WorkerNameMatches("*", "anything"));
  EXPECT_TRUE(WorkerNameMatchesAny({"node1-*", "node7-gpu3"}, "node7-gpu3"));
  EXPECT_FALSE(WorkerNameMatchesAny({"node1-*", "node7-gpu3"}, "node2-gpu0"));
  EXPECT_FALSE(WorkerNameMatchesAny({}, "node2-gpu0"));
}

}  // namespace
}  // namespace shardwise
