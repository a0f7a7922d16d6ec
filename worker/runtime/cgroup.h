#ifndef SHARDWISE_WORKER_RUNTIME_CGROUP_H_
#define SHARDWISE_WORKER_RUNTIME_CGROUP_H_

// This process's control group (v2, the unified hierarchy: what a container's limits
// are), as the worker's resource checks read it.

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace shardwise {

// This process's folder under /sys/fs/cgroup ("" for the root, "/kubepods/pod1/c1" in a
// container) from the text of /proc/self/cgroup: the unified hierarchy's line, "0::PATH";
// nullopt where there is none (cgroup v1 only). Only a whole line counts, so a v1
// hierarchy numbered 10 without controllers ("10::/x") is not taken for it.
std::optional<std::string> OwnCgroupFolder(absl::string_view proc_self_cgroup);

// The text of `file` (memory.max, cpu.max, ...) in this process's cgroup folder under
// /sys/fs/cgroup; empty where there is none (cgroup v1, or no such controller).
std::string ReadOwnCgroupFile(const std::string& file);

// The text of a small file (/proc, /sys); empty if it cannot be read.
std::string ReadSmallFile(const std::string& path);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_CGROUP_H_
