#ifndef SHARDWISE_COMMON_SELF_RESTART_H_
#define SHARDWISE_COMMON_SELF_RESTART_H_

// Restarts this process in place: closes every descriptor but stdin, stdout and stderr
// (so peers see its sockets close at once, and the new image inherits none of them), then
// executes this program again with `argv`. The pid, and so a worker's default name,
// stays the same. Does not return; exits with 3 if the program cannot be executed.

namespace shardwise {

[[noreturn]] void RestartProcess(char** argv);

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_SELF_RESTART_H_
