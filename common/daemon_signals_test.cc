// The daemons' stop signals: a flag while the daemon runs, the system's default action
// once it hands them back before executing itself again.

#include "common/daemon_signals.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// Each case in a child of its own (death tests): the handlers are process-wide.
TEST(DaemonSignalsDeathTest, AStopIsAFlagUntilTheSignalsAreHandedBack) {
  EXPECT_EXIT(
      {
        const std::atomic<bool>& stop = StopRequestedOnSignal();
        std::raise(SIGTERM);
        const bool came_before = HandStopSignalsToTheSystem();
        std::_Exit(stop && came_before ? 7 : 1);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(DaemonSignalsDeathTest, AStopAfterTheSignalsAreHandedBackEndsTheProcess) {
  EXPECT_EXIT(
      {
        StopRequestedOnSignal();
        if (HandStopSignalsToTheSystem()) std::_Exit(1);  // no stop came before
        std::raise(SIGTERM);
        std::_Exit(2);  // absorbed: the new image would have run on
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

}  // namespace
}  // namespace shardwise
