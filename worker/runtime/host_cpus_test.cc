#include "worker/runtime/host_cpus.h"

#include <thread>

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

TEST(HostCpuThreads, IsBetweenOneAndTheMachinesCores) {
  const int threads = HostCpuThreads();
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

}  // namespace
}  // namespace shardwise
