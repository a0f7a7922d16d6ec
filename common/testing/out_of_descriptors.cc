#include "common/testing/out_of_descriptors.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace shardwise::testing {

int ExitCodeWithoutFileDescriptors(const std::function<int()>& check) {
  constexpr int kSetupFailed = 125;
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(kSetupFailed);
    limit.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(kSetupFailed);
    while (::open("/dev/null", O_RDONLY) >= 0) {
    }
    _exit(check());
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  const int code = WEXITSTATUS(status);
  return code == kSetupFailed ? -1 : code;
}

}  // namespace shardwise::testing
