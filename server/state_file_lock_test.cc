#include "server/state_file_lock.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string StateFile() { return testing::ScratchPath("state.db"); }

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

// A coordinator given a symlink to the state file and one given the file itself would
// both have run on it (each locking its own name) until the lock followed the link. The
// file does not exist yet here, as on a first start.
TEST(StateFileLock, ASymlinkToTheStateFileSharesItsLock) {
  const std::string real = StateFile() + "-real", link = StateFile() + "-link";
  ::unlink(link.c_str());
  ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
  auto through_link = StateFileLock::Acquire(link);
  ASSERT_TRUE(through_link.ok()) << through_link.status();
  auto direct = StateFileLock::Acquire(real);
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kFailedPrecondition) << direct.status();
  through_link->reset();
  auto direct_again = StateFileLock::Acquire(real);
  ASSERT_TRUE(direct_again.ok()) << direct_again.status();
  EXPECT_EQ(StateFileLock::Acquire(link).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StateFileLock, AnUnwritableFolderIsPermissionDenied) {
  EXPECT_EQ(StateFileLock::Acquire("/proc/no-such-dir/state.db").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace shardwise
