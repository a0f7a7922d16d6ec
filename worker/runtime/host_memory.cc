#include "worker/runtime/host_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "worker/runtime/cgroup.h"

namespace shardwise {
namespace {

// memory.max less memory.current of this process's cgroup (v2), less its reclaimable
// file cache, or -1 without a limit.
int64_t ThisCgroupMemoryLeft() {
  return CgroupMemoryLeft(ReadOwnCgroupFile("memory.max"), ReadOwnCgroupFile("memory.current"),
                          ReadOwnCgroupFile("memory.stat"));
}

// RLIMIT_AS less the process's virtual size, or -1 without a limit.
int64_t AddressSpaceLeft() {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  auto size = ParseKilobyteField(ReadSmallFile("/proc/self/status"), "VmSize");
  if (!size.ok()) return -1;
  return std::max<int64_t>(static_cast<int64_t>(limit.rlim_cur) - *size, 0);
}

}  // namespace

namespace {

// The value of memory.stat's field `name` (bytes); 0 where it is missing or not a number.
int64_t StatField(absl::string_view stat_text, absl::string_view name) {
  const std::string prefix = absl::StrCat(name, " ");
  for (absl::string_view line : absl::StrSplit(stat_text, '\n')) {
    int64_t value = 0;
    if (absl::ConsumePrefix(&line, prefix)) {
      return absl::SimpleAtoi(line, &value) && value >= 0 ? value : 0;
    }
  }
  return 0;
}

// memory.max less memory.current, `reclaimable` of it counted as free; -1 without a limit.
int64_t CgroupMemoryFree(absl::string_view max_text, absl::string_view current_text,
                         int64_t reclaimable) {
  int64_t limit = 0, current = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(max_text), &limit) ||
      !absl::SimpleAtoi(absl::StripAsciiWhitespace(current_text), &current)) {
    return -1;  // "max", or no memory controller
  }
  const int64_t in_use = std::max<int64_t>(current - std::min(reclaimable, current), 0);
  return std::max<int64_t>(limit - in_use, 0);
}

}  // namespace

int64_t CgroupMemoryLeft(absl::string_view max_text, absl::string_view current_text,
                         absl::string_view stat_text) {
  // The cache of files read and written (token files, checkpoints) counts in
  // memory.current; the kernel drops its inactive part before it would refuse memory,
  // so it is not in use (kubelet's working set leaves it out the same way).
  return CgroupMemoryFree(max_text, current_text, StatField(stat_text, "inactive_file"));
}

int64_t CgroupMemoryBeforeOomKill(absl::string_view max_text, absl::string_view current_text,
                                  absl::string_view stat_text) {
  // tmpfs pages (shmem: /dev/shm, a memory-backed emptyDir) count in `file` but cannot be
  // dropped without swap.
  return CgroupMemoryFree(
      max_text, current_text,
      std::max<int64_t>(StatField(stat_text, "file") - StatField(stat_text, "shmem"), 0));
}

int64_t ThisCgroupMemoryBeforeOomKill() {
  return CgroupMemoryBeforeOomKill(ReadOwnCgroupFile("memory.max"),
                                   ReadOwnCgroupFile("memory.current"),
                                   ReadOwnCgroupFile("memory.stat"));
}

absl::StatusOr<int64_t> ParseKilobyteField(absl::string_view text, absl::string_view name) {
  const std::string key = absl::StrCat(name, ":");
  for (size_t line = 0; line < text.size();) {
    size_t end = text.find('\n', line);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view row = text.substr(line, end - line);
    if (absl::ConsumePrefix(&row, key)) {
      row = absl::StripAsciiWhitespace(row);
      absl::ConsumeSuffix(&row, "kB");
      int64_t kilobytes = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(row), &kilobytes) && kilobytes >= 0 &&
          kilobytes <= (int64_t{1} << 53)) {
        return kilobytes * 1024;
      }
    }
    line = end + 1;
  }
  return absl::NotFoundError(absl::StrCat("no '", name, ":' line"));
}

absl::StatusOr<int64_t> HostMemoryAvailable() {
  auto available = ParseKilobyteField(ReadSmallFile("/proc/meminfo"), "MemAvailable");
  if (!available.ok()) {
    return absl::InternalError(
        absl::StrCat("reading /proc/meminfo: ", available.status().message()));
  }
  int64_t left = *available;
  for (int64_t limit : {AddressSpaceLeft(), ThisCgroupMemoryLeft()}) {
    if (limit >= 0) left = std::min(left, limit);
  }
  return left;
}

int64_t MemoryCeiling(int64_t physical, absl::string_view max_text) {
  int64_t cgroup = 0;
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(max_text), &cgroup) && cgroup >= 0) {
    return std::min(physical, cgroup);
  }
  return physical;
}

int64_t HostMemoryCeiling() {
  return MemoryCeiling(static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE),
                       ReadOwnCgroupFile("memory.max"));
}

}  // namespace shardwise
