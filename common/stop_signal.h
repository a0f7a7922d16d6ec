#ifndef SHARDWISE_COMMON_STOP_SIGNAL_H_
#define SHARDWISE_COMMON_STOP_SIGNAL_H_

// SIGINT and SIGTERM as a flag a daemon's main loop polls (a signal handler may only set
// a lock-free atomic; the shutdown itself happens on a normal thread).

#include <atomic>

namespace shardwise {

// Installs the handlers (once) and returns the flag they set.
const std::atomic<bool>& StopRequestedOnSignal();

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_STOP_SIGNAL_H_
