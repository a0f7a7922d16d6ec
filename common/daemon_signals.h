#ifndef SHARDWISE_COMMON_DAEMON_SIGNALS_H_
#define SHARDWISE_COMMON_DAEMON_SIGNALS_H_

// Signal handling for the daemons: SIGINT and SIGTERM become a flag the main loop polls
// (a signal handler may only set a lock-free atomic; the shutdown happens on a normal
// thread), and SIGPIPE is ignored.

#include <atomic>

namespace shardwise {

// Installs the handlers (once) and returns the flag they set.
const std::atomic<bool>& StopRequestedOnSignal();

// Gives SIGINT and SIGTERM back their default action (ending the process) and returns
// whether one came before: for a daemon about to execute itself again (RestartProcess),
// whose handler would absorb a stop arriving after its last look at the flag, and the
// new image would run on. From here a stop ends the process at once; one that came
// before is the caller's to honour instead of restarting.
bool HandStopSignalsToTheSystem();

// A peer that dies mid-collective leaves a socket whose next write raises SIGPIPE, whose
// default action kills the process without a word. Ignored, the write fails with EPIPE,
// Gloo throws, and the attempt ends with an error the coordinator can report.
void IgnoreBrokenPipes();

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_DAEMON_SIGNALS_H_
