#ifndef SHARDWISE_BENCH_LOAD_SPAWN_H_
#define SHARDWISE_BENCH_LOAD_SPAWN_H_

// Starting the daemons a benchmark measures as child processes: the command's output
// to a log file, and the child killed (SIGKILL) if the benchmark dies first.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise::load {

// Starts argv[0] with `argv`, its stdout and stderr to `log_path`; the child's pid.
absl::StatusOr<pid_t> SpawnLogged(std::vector<std::string> argv, const std::string& log_path);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_SPAWN_H_
