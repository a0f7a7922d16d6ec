#include "common/daemon_signals.h"

#include <csignal>

namespace shardwise {
namespace {

std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnStopSignal(int) { g_stop_requested = true; }

}  // namespace

const std::atomic<bool>& StopRequestedOnSignal() {
  static const bool installed = [] {
    std::signal(SIGINT, OnStopSignal);
    std::signal(SIGTERM, OnStopSignal);
    return true;
  }();
  (void)installed;
  return g_stop_requested;
}

bool HandStopSignalsToTheSystem() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  return g_stop_requested;
}

void IgnoreBrokenPipes() { std::signal(SIGPIPE, SIG_IGN); }

}  // namespace shardwise
