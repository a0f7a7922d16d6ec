#include "worker/daemon/system_failure.h"

#include "absl/strings/str_cat.h"

namespace shardwise {

absl::Status SystemFailureStatus(const std::system_error& failure) {
  const std::error_code code = failure.code();
  if (code == std::errc::resource_unavailable_try_again || code == std::errc::not_enough_memory) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this worker could not start a thread (", failure.what(),
                     "): the host or its container is out of threads or memory (a pids limit?)"));
  }
  return absl::InternalError(absl::StrCat("a system call failed on this worker: ", failure.what()));
}

}  // namespace shardwise
