#ifndef SHARDWISE_SERVER_STATE_FILE_LOCK_H_
#define SHARDWISE_SERVER_STATE_FILE_LOCK_H_

// One coordinator per state file: an exclusive lock (flock) on STATE_FILE.lock (beside the
// file the name resolves to, so a symlink to the file shares its lock), held for
// the coordinator's life and released by the kernel if it dies. The lock file holds the
// holder's pid, so a second coordinator can say who has the file. Two coordinators on one
// file would each hand out job ids from their own view of it and lose submissions.
//
// Thread-safety: none needed; one per process.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace shardwise {

class StateFileLock {
 public:
  // FAILED_PRECONDITION naming the holder's pid when another process holds the lock;
  // PERMISSION_DENIED when the lock file cannot be created.
  static absl::StatusOr<std::unique_ptr<StateFileLock>> Acquire(const std::string& state_file);
  ~StateFileLock();
  StateFileLock(const StateFileLock&) = delete;
  StateFileLock& operator=(const StateFileLock&) = delete;

 private:
  explicit StateFileLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_STATE_FILE_LOCK_H_
