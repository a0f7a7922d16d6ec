#ifndef SHARDWISE_BENCH_MULTIPROCESS_H_
#define SHARDWISE_BENCH_MULTIPROCESS_H_

// Runs `body(rank, store)` in `world` forked processes that rendezvous through a Gloo
// FileStore in a fresh directory, as separate worker processes would. Returns false if
// any rank exited non-zero.

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "gloo/rendezvous/file_store.h"

namespace shardwise::bench {

inline bool RunRanks(int world, const std::function<int(int, gloo::rendezvous::Store&)>& body) {
  char pattern[] = "/tmp/shardwise-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  std::vector<pid_t> children;
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      gloo::rendezvous::FileStore store(dir);
      std::_Exit(body(rank, store));
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::system(("rm -rf " + dir).c_str());
  return ok;
}

}  // namespace shardwise::bench

#endif  // SHARDWISE_BENCH_MULTIPROCESS_H_
