#ifndef SHARDWISE_WORKER_RUNTIME_CGROUP_H_
#define SHARDWISE_WORKER_RUNTIME_CGROUP_H_

// This process's control group (v2, the unified hierarchy: what a container's limits
// are), as the worker's resource checks read it.

#include <string>

namespace shardwise {

// The text of `file` (memory.max, cpu.max, ...) in this process's cgroup folder under
// /sys/fs/cgroup; empty where there is none (cgroup v1, or no such controller).
std::string ReadOwnCgroupFile(const std::string& file);

// The text of a small file (/proc, /sys); empty if it cannot be read.
std::string ReadSmallFile(const std::string& path);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_CGROUP_H_
