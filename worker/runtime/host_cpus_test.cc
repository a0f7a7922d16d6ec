#include "worker/runtime/host_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A pod limited to 2.5 CPUs on a 64-core node has 3 threads' worth, not 64.
TEST(CpuThreadsWithin, TheCgroupQuotaBoundsTheAffinity) {
  EXPECT_EQ(CpuThreadsWithin(64, "250000 100000\n"), 3);
  EXPECT_EQ(CpuThreadsWithin(64, "200000 100000"), 2);
  EXPECT_EQ(CpuThreadsWithin(4, "800000 100000"), 4);
  EXPECT_EQ(CpuThreadsWithin(8, "max 100000\n"), 8);
  EXPECT_EQ(CpuThreadsWithin(8, ""), 8);
  EXPECT_EQ(CpuThreadsWithin(8, "garbage"), 8);
  EXPECT_EQ(CpuThreadsWithin(8, "50000 100000"), 1);  // half a CPU: one thread
  EXPECT_EQ(CpuThreadsWithin(0, ""), 1);
}

// This process's share, found here by hand: the CPUs it may run on, bounded by its cgroup's
// quota (the unified hierarchy's folder from /proc/self/cgroup, its cpu.max "QUOTA
// PERIOD", rounded up); "max" or no such file (a v1-only or hybrid host) bounds nothing.
TEST(HostCpuThreads, IsTheAffinityBoundedByThisProcesssCgroupQuota) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  int64_t expected = CPU_COUNT(&set);
  std::ifstream membership("/proc/self/cgroup");
  for (std::string line; std::getline(membership, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string folder = line.substr(3) == "/" ? "" : line.substr(3);
    std::ifstream cpu_max("/sys/fs/cgroup" + folder + "/cpu.max");
    int64_t quota = 0, period = 0;
    if (cpu_max >> quota >> period && quota > 0 && period > 0) {
      expected = std::min(expected, (quota + period - 1) / period);
    }
  }
  EXPECT_EQ(HostCpuThreads(), std::max<int64_t>(1, expected));
}

}  // namespace
}  // namespace shardwise
