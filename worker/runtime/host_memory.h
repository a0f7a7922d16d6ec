#ifndef SHARDWISE_WORKER_RUNTIME_HOST_MEMORY_H_
#define SHARDWISE_WORKER_RUNTIME_HOST_MEMORY_H_

// How much host memory this process may still allocate: the least of what the kernel
// says is available (MemAvailable), what the address-space limit leaves (RLIMIT_AS less
// the process's size; `prlimit --as`, `ulimit -v`) and what the cgroup's limit leaves
// (memory.max less what is in use, its reclaimable file cache left out; a container's
// limit). A CPU worker compares it with a
// job's estimated memory per rank before it starts an attempt.

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// The value in bytes of a "Name:   N kB" line of /proc/meminfo or /proc/self/status;
// NOT_FOUND when there is no such line.
absl::StatusOr<int64_t> ParseKilobyteField(absl::string_view text, absl::string_view name);

// What a cgroup (v2) leaves this process: memory.max (`max_text`) less what is in use,
// memory.current (`current_text`) less the reclaimable file cache (memory.stat's
// inactive_file, from `stat_text`); -1 without a limit ("max").
int64_t CgroupMemoryLeft(absl::string_view max_text, absl::string_view current_text,
                         absl::string_view stat_text);

// What a cgroup (v2) lets this process add before the kernel's OOM killer ends it:
// memory.max less memory.current with its file cache (memory.stat's `file`, less `shmem`:
// tmpfs pages stay) counted as free, since the kernel drops cache before it kills; -1
// without a limit. The
// optimistic reading, where CgroupMemoryLeft is the cautious one: what a CPU worker's
// allocator refuses an allocation against (CpuCachingAllocator), where a refusal must
// mean the memory is not there.
int64_t CgroupMemoryBeforeOomKill(absl::string_view max_text, absl::string_view current_text,
                                  absl::string_view stat_text);
// CgroupMemoryBeforeOomKill of this process's cgroup.
int64_t ThisCgroupMemoryBeforeOomKill();

// INTERNAL when /proc/meminfo cannot be read.
absl::StatusOr<int64_t> HostMemoryAvailable();

// The most host memory this process's container may ever hold: `physical` (the
// machine's), bounded by its cgroup's memory.max (`max_text`: "max" or empty, none). What
// a CPU worker advertises for a rank: in a pod, its limit, not the node's memory. (An
// address-space limit is left to the worker's own check before an attempt: it bounds
// mappings, not memory.)
int64_t MemoryCeiling(int64_t physical, absl::string_view max_text);
// MemoryCeiling of this process.
int64_t HostMemoryCeiling();

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_HOST_MEMORY_H_
