#include "worker/runtime/host_memory.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(ParseKilobyteField, ReadsTheNamedLine) {
  const char* meminfo =
      "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   20000000 kB\n";
  EXPECT_EQ(*ParseKilobyteField(meminfo, "MemAvailable"), int64_t{20000000} * 1024);
  EXPECT_EQ(*ParseKilobyteField(meminfo, "MemFree"), 1000 * 1024);
  EXPECT_EQ(ParseKilobyteField(meminfo, "Mem").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ParseKilobyteField("VmSize:\tgarbage kB\n", "VmSize").status().code(),
            absl::StatusCode::kNotFound);
}

// A container whose 16 GiB limit holds 12 GiB, 10 GiB of them a file cache the kernel
// may drop (token files read, checkpoints written): 14 GiB are left, not 4.
TEST(CgroupMemoryLeft, LeavesTheReclaimableFileCacheOut) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const std::string stat = absl::StrCat("anon ", 2 * kGiB, "\nfile ", 10 * kGiB,
                                        "\nactive_file 0\ninactive_file ", 10 * kGiB, "\n");
  EXPECT_EQ(CgroupMemoryLeft(absl::StrCat(16 * kGiB, "\n"), absl::StrCat(12 * kGiB, "\n"), stat),
            14 * kGiB);
  EXPECT_EQ(CgroupMemoryLeft(absl::StrCat(16 * kGiB), absl::StrCat(12 * kGiB), ""), 4 * kGiB);
  EXPECT_EQ(CgroupMemoryLeft("max\n", "100\n", stat), -1);
  // A cache larger than what is counted (the files raced ahead of the read): none in use.
  EXPECT_EQ(CgroupMemoryLeft("1000", "100", "inactive_file 500\n"), 1000);
  EXPECT_EQ(CgroupMemoryLeft("1000", "2000", "inactive_file x\n"), 0);
}

// What the kernel lets a cgroup add before it kills: all of its file cache counts as
// free (the active part too), unlike CgroupMemoryLeft's cautious reading.
TEST(CgroupMemoryBeforeOomKill, CountsAllTheFileCacheAsFree) {
  constexpr int64_t kGiB = int64_t{1} << 30;
  const std::string stat = absl::StrCat("anon ", 2 * kGiB, "\nfile ", 10 * kGiB, "\nactive_file ",
                                        6 * kGiB, "\ninactive_file ", 4 * kGiB, "\n");
  EXPECT_EQ(CgroupMemoryBeforeOomKill(absl::StrCat(16 * kGiB), absl::StrCat(12 * kGiB), stat),
            14 * kGiB);
  EXPECT_EQ(CgroupMemoryLeft(absl::StrCat(16 * kGiB), absl::StrCat(12 * kGiB), stat), 8 * kGiB);
  EXPECT_EQ(CgroupMemoryBeforeOomKill("max", "100", stat), -1);
  // "file_mapped", "file_dirty" are other fields: only `file` itself counts, less the
  // tmpfs pages in it (shmem), which the kernel cannot drop.
  EXPECT_EQ(CgroupMemoryBeforeOomKill("1000", "900", "file_mapped 800\nfile 100\n"), 200);
  EXPECT_EQ(CgroupMemoryBeforeOomKill("1000", "900", "file 300\nshmem 200\n"), 200);
  EXPECT_EQ(CgroupMemoryBeforeOomKill("1000", "900", "file 100\nshmem 200\n"), 100);
}

// What a worker advertises: the machine's memory, bounded by its pod's limit.
TEST(MemoryCeiling, IsTheLeastOfTheMachineAndTheCgroupsLimit) {
  constexpr int64_t kMachine = int64_t{512} << 30, kPod = int64_t{16} << 30;
  EXPECT_EQ(MemoryCeiling(kMachine, "17179869184\n"), kPod);
  EXPECT_EQ(MemoryCeiling(kMachine, "max\n"), kMachine);
  EXPECT_EQ(MemoryCeiling(kMachine, ""), kMachine);  // no memory controller
  EXPECT_EQ(MemoryCeiling(int64_t{4} << 30, "17179869184"), int64_t{4} << 30);
}

// This process's limit, found here by hand: the unified hierarchy's folder from
// /proc/self/cgroup, its memory.max; a number below the machine's memory is the ceiling,
// anything else ("max", no such file on a v1-only or hybrid host) leaves the machine's.
TEST(HostMemoryCeiling, IsThisProcesssCgroupLimitOrTheMachines) {
  const int64_t machine = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  int64_t expected = machine;
  std::ifstream membership("/proc/self/cgroup");
  for (std::string line; std::getline(membership, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string folder = line.substr(3) == "/" ? "" : line.substr(3);
    std::ifstream max_file("/sys/fs/cgroup" + folder + "/memory.max");
    int64_t limit = 0;
    if (max_file >> limit && limit < machine) expected = limit;
  }
  EXPECT_EQ(HostMemoryCeiling(), expected);
}

TEST(HostMemoryAvailable, IsPositiveAndAtMostThePhysicalMemory) {
  auto available = HostMemoryAvailable();
  ASSERT_TRUE(available.ok()) << available.status();
  EXPECT_GT(*available, 0);
  EXPECT_LE(*available, static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE));
}

// An address-space limit (prlimit --as) bounds what is available: in a child process,
// limited to its current size plus 256 MiB.
TEST(HostMemoryAvailable, AnAddressSpaceLimitBoundsIt) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto before = HostMemoryAvailable();
    if (!before.ok()) _exit(10);
    // VmSize from the same source the function reads, then the limit above it.
    rlimit limit{};
    auto size = ParseKilobyteField(
        [] {
          FILE* f = fopen("/proc/self/status", "r");
          std::string text;
          char buffer[4096];
          size_t n;
          while (f != nullptr && (n = fread(buffer, 1, sizeof(buffer), f)) > 0)
            text.append(buffer, n);
          if (f != nullptr) fclose(f);
          return text;
        }(),
        "VmSize");
    if (!size.ok()) _exit(11);
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(*size + (int64_t{256} << 20));
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(12);
    auto after = HostMemoryAvailable();
    if (!after.ok()) _exit(13);
    // At most the 256 MiB left (less whatever the reads allocated), and not nothing.
    _exit(*after <= (int64_t{256} << 20) && *after > (int64_t{200} << 20) ? 0 : 14);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace shardwise
