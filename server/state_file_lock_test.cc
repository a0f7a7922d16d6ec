#include "server/state_file_lock.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string StateFile() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/state-", getpid(), ".db");
}

TEST(StateFileLock, OneHolderAtATimeAndTheSecondLearnsItsPid) {
  auto first = StateFileLock::Acquire(StateFile());
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = StateFileLock::Acquire(StateFile());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(absl::StrCat("(pid ", getpid(), ",")), std::string::npos)
      << second.status();
  first->reset();  // released
  EXPECT_TRUE(StateFileLock::Acquire(StateFile()).ok());
}

TEST(StateFileLock, AnUnwritableFolderIsPermissionDenied) {
  EXPECT_EQ(StateFileLock::Acquire("/proc/no-such-dir/state.db").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace shardwise
