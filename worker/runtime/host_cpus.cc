#include "worker/runtime/host_cpus.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "worker/runtime/cgroup.h"

namespace shardwise {

int CpuThreadsWithin(int affinity, absl::string_view cpu_max) {
  int threads = std::max(1, affinity);
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(cpu_max), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() == 2 && absl::SimpleAtoi(fields[0], &quota) &&
      absl::SimpleAtoi(fields[1], &period) && quota > 0 && period > 0) {
    const int64_t allowed = (quota + period - 1) / period;
    threads = static_cast<int>(std::min<int64_t>(threads, allowed));
  }
  return std::max(1, threads);
}

int HostCpuThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int affinity = sched_getaffinity(0, sizeof(set), &set) == 0
                           ? CPU_COUNT(&set)
                           : static_cast<int>(std::thread::hardware_concurrency());
  return CpuThreadsWithin(affinity, ReadOwnCgroupFile("cpu.max"));
}

}  // namespace shardwise
