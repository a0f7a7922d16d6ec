#include "common/self_restart.h"

#include <dirent.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace shardwise {

void RestartProcess(char** argv) {
  std::fflush(stderr);
  std::fflush(stdout);
  // Collect first, close after: closing while iterating would close the directory's own
  // descriptor under it.
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(dir);
    while (const dirent* entry = ::readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd > 2 && fd != own) open.push_back(fd);
    }
    ::closedir(dir);
  }
  for (int fd : open) ::close(fd);
  ::execv("/proc/self/exe", argv);
  std::perror("restarting: execv /proc/self/exe");
  std::_Exit(3);
}

}  // namespace shardwise
