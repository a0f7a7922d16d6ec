// shardwise-coordinator: the control plane. See docs/operations.md for every flag.

#include <cstdio>
#include <fstream>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/daemon_signals.h"
#include "server/coordinator.h"

ABSL_FLAG(std::string, address, "127.0.0.1:7070",
          "host:port to listen on; 127.0.0.1 keeps the coordinator local, 0.0.0.0 exposes it; "
          "port 0 picks a free port");
ABSL_FLAG(std::string, state_file, "shardwise-state.db", "SQLite file holding every job");
ABSL_FLAG(std::string, port_file, "", "if set, the bound port is written here once serving");
ABSL_FLAG(int64_t, heartbeat_interval_ms, 1000, "how often workers send a heartbeat");
ABSL_FLAG(int64_t, heartbeat_timeout_ms, 10000,
          "a worker silent for longer is lost, and its job's attempt fails");
ABSL_FLAG(int64_t, collective_timeout_ms, 60000,
          "workers' timeout for rendezvous and collectives");
ABSL_FLAG(int64_t, hook_switch_lead_ms, 2000,
          "a comm hook switch is proposed for the step a job should reach this long after "
          "its latest progress report (and at least 3 steps ahead)");
ABSL_FLAG(int64_t, stall_warning_ms, 60000,
          "ranks waiting this long in a collective for ranks that have not entered it are "
          "reported as a stall in the job's events");
ABSL_FLAG(int64_t, stall_abort_ms, 0,
          "if > 0, a stall this long fails the attempt with the stall as its reason");
ABSL_FLAG(int64_t, reattach_grace_ms, 30000,
          "after a restart, how long the ranks of the jobs that were RUNNING have to "
          "re-attach (their workers train on meanwhile); a job missing a rank then is "
          "re-queued from its newest checkpoint");
ABSL_FLAG(int32_t, max_world_size, 1024, "largest world_size a job may ask for");
ABSL_FLAG(int64_t, max_parameters, int64_t{8} << 30, "largest model, in parameters");
ABSL_FLAG(int64_t, max_steps, int64_t{1} << 40, "most steps a job may ask for");
ABSL_FLAG(bool, check_paths, true,
          "refuse jobs whose data or weight files this coordinator cannot read");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("The Shardwise coordinator. Usage: shardwise-coordinator [flags]");
  absl::ParseCommandLine(argc, argv);

  shardwise::CoordinatorOptions options;
  options.listen_address = absl::GetFlag(FLAGS_address);
  options.state_file = absl::GetFlag(FLAGS_state_file);
  auto& controller = options.controller;
  controller.heartbeat_interval = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  controller.heartbeat_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  controller.collective_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_collective_timeout_ms));
  controller.hook_switch_lead = absl::Milliseconds(absl::GetFlag(FLAGS_hook_switch_lead_ms));
  controller.stall_warning = absl::Milliseconds(absl::GetFlag(FLAGS_stall_warning_ms));
  controller.stall_abort = absl::Milliseconds(absl::GetFlag(FLAGS_stall_abort_ms));
  controller.reattach_grace = absl::Milliseconds(absl::GetFlag(FLAGS_reattach_grace_ms));
  controller.limits.max_world_size = absl::GetFlag(FLAGS_max_world_size);
  controller.limits.max_parameters = absl::GetFlag(FLAGS_max_parameters);
  controller.limits.max_steps = absl::GetFlag(FLAGS_max_steps);
  controller.check_paths = absl::GetFlag(FLAGS_check_paths);
  if (controller.heartbeat_timeout <= controller.heartbeat_interval) {
    std::fprintf(stderr, "--heartbeat_timeout_ms must exceed --heartbeat_interval_ms\n");
    return 2;
  }

  auto coordinator = shardwise::Coordinator::Start(options);
  if (!coordinator.ok()) {
    std::fprintf(stderr, "shardwise-coordinator: %s\n",
                 std::string(coordinator.status().message()).c_str());
    return 1;
  }
  const int port = (*coordinator)->port();
  std::fprintf(stderr, "shardwise-coordinator: serving on port %d, state in %s\n", port,
               options.state_file.c_str());
  if (const std::string port_file = absl::GetFlag(FLAGS_port_file); !port_file.empty()) {
    // Written whole under a temporary name, so a reader never sees half a number.
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    std::rename(tmp.c_str(), port_file.c_str());
  }

  shardwise::IgnoreBrokenPipes();
  const std::atomic<bool>& stop = shardwise::StopRequestedOnSignal();
  std::thread waiter([&] { (*coordinator)->Wait(); });
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::fprintf(stderr, "shardwise-coordinator: shutting down\n");
  (*coordinator)->Shutdown();
  waiter.join();
  return 0;
}
