#ifndef SHARDWISE_COMMON_WORKER_NAME_H_
#define SHARDWISE_COMMON_WORKER_NAME_H_

// A worker's name, and the names a worker token may register (a tokens file's
// `worker_names`, which `shardwise token create --worker_names` writes and the
// coordinator reads). A name becomes a line of `get workers` and a field of the logs'
// prefix (`worker=NAME`): printable, at most 256 bytes, and without a space or '=', which
// would let a name such as "x job=job-3" forge the fields after it.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {

inline constexpr size_t kMaxWorkerNameBytes = 256;

// INVALID_ARGUMENT naming `field` unless `name` is a worker's name as above.
absl::Status CheckWorkerName(const std::string& field, const std::string& name);

// A pattern of `worker_names`: a name, or a prefix followed by one '*' at its end
// ("node7-*": every name that starts with "node7-"; "*" alone: any). INVALID_ARGUMENT
// naming `field` for an empty one, a '*' elsewhere, or a prefix that is not a name's.
absl::Status CheckWorkerNamePattern(const std::string& field, const std::string& pattern);

// At most this many patterns in one entry.
inline constexpr size_t kMaxWorkerNamePatterns = 1024;

// Whether `name` matches `pattern` (one CheckWorkerNamePattern takes).
bool WorkerNameMatches(absl::string_view pattern, absl::string_view name);

// Whether `name` matches one of `patterns`.
bool WorkerNameMatchesAny(const std::vector<std::string>& patterns, absl::string_view name);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_WORKER_NAME_H_
