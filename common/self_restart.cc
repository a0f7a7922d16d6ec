#include "common/self_restart.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace shardwise {

void RestartProcess(char** argv) {
  std::fflush(stderr);
  std::fflush(stdout);
  // Collect first, mark after: the directory's own descriptor is among those listed.
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* entry = ::readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != own) open.push_back(fd);
    }
    ::closedir(dir);
  }
  for (int fd : open) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  ::execv("/proc/self/exe", argv);
  std::perror("restarting: execv /proc/self/exe");
  std::_Exit(3);
}

}  // namespace shardwise
