#include "worker/runtime/cgroup.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// /proc/self/cgroup as a container sees it (v2 only), as a hybrid host does (v1
// controllers beside the unified line), and as a v1-only host does.
TEST(OwnCgroupFolder, IsTheUnifiedHierarchysLine) {
  EXPECT_EQ(OwnCgroupFolder("0::/kubepods/pod1/c1\n"), "/kubepods/pod1/c1");
  EXPECT_EQ(OwnCgroupFolder("0::/\n"), "");
  EXPECT_EQ(OwnCgroupFolder("4:memory:/job\n1:cpu:/\n0::/system.slice/w.service\n"),
            "/system.slice/w.service");
  EXPECT_EQ(OwnCgroupFolder("4:memory:/job\n1:cpu:/\n"), std::nullopt);
  EXPECT_EQ(OwnCgroupFolder(""), std::nullopt);
}

// A v1 hierarchy numbered 10 without controllers holds "0::" inside its line: only a line
// that starts with it is the unified hierarchy's.
TEST(OwnCgroupFolder, TakesOnlyAWholeLine) {
  EXPECT_EQ(OwnCgroupFolder("10::/v1-named\n"), std::nullopt);
  EXPECT_EQ(OwnCgroupFolder("10::/v1-named\n0::/unified\n"), "/unified");
}

}  // namespace
}  // namespace shardwise
