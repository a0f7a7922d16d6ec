#ifndef SHARDWISE_WORKER_DAEMON_SYSTEM_FAILURE_H_
#define SHARDWISE_WORKER_DAEMON_SYSTEM_FAILURE_H_

// What the worker makes of a std::system_error, which std::thread (and std::async)
// throw when a thread cannot start (EAGAIN: a pids cgroup's limit, the host's
// threads-max): a status that fails the attempt or the call at hand. Left to escape, it
// would end the daemon (std::terminate) and every rank it runs.

#include <system_error>

#include "absl/status/status.h"

namespace shardwise {

// RESOURCE_EXHAUSTED for a host out of threads or memory (the attempt may run elsewhere
// or later), marked as this worker's fault (IsThisWorkersFault), which its report of the
// rank says (worker_fault); INTERNAL otherwise. The message says what failed.
absl::Status SystemFailureStatus(const std::system_error& failure);

// Whether `status` came from SystemFailureStatus: the worker's own failure, not the job's.
bool IsThisWorkersFault(const absl::Status& status);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_SYSTEM_FAILURE_H_
