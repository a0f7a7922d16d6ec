#ifndef SHARDWISE_COMMON_SELF_RESTART_H_
#define SHARDWISE_COMMON_SELF_RESTART_H_

// Restarts this process in place: executes this program again with `argv`, every
// descriptor but stdin, stdout and stderr marked close-on-exec first (so peers see its
// sockets close at once, and the new image inherits none of them). Marked, not closed:
// other threads (a Gloo transport's event loop) still use them until the exec ends them,
// and one that found its descriptor closed under it would abort the process instead.
// The pid, and so a worker's default name, stays the same. Does not return; exits with
// 3 if the program cannot be executed.

namespace shardwise {

[[noreturn]] void RestartProcess(char** argv);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_SELF_RESTART_H_
