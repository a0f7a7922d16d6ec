#include "common/bazel_run.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardwise {

absl::Status EnterBazelRunWorkingDirectory() {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (dir == nullptr || *dir == '\0') return absl::OkStatus();
  if (::chdir(dir) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot enter BUILD_WORKING_DIRECTORY '", dir,
                     "' (where bazel run was typed): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace shardwise
