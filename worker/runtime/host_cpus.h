#ifndef SHARDWISE_WORKER_RUNTIME_HOST_CPUS_H_
#define SHARDWISE_WORKER_RUNTIME_HOST_CPUS_H_

// How many CPUs this process may use, as a worker advertises them (`shardwise get
// workers`): the CPUs its affinity allows, bounded by its cgroup's CPU quota (a pod's
// CPU limit), not the node's cores.

#include "absl/strings/string_view.h"

namespace shardwise {

// `affinity` CPUs bounded by a cgroup's cpu.max (`cpu_max`: "QUOTA PERIOD" in
// microseconds, "max PERIOD" or empty for none), the quota rounded up; at least 1.
int CpuThreadsWithin(int affinity, absl::string_view cpu_max);

// CpuThreadsWithin for this process.
int HostCpuThreads();

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_HOST_CPUS_H_
