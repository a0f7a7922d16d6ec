// The coordinator under a simulated cluster (bench/load/load_generator.h): N workers,
// a queue of jobs, clients listing and watching. Prints the figures bench/RESULTS.md
// records; bench/coordinator_load.sh runs it at 100, 1,000 and 5,000 workers.
//
//   coordinator_load --coordinator_binary=bazel-bin/server/shardwise-coordinator
//       --workers=1000 --jobs=1000 --world_size=8

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "bench/load/load_generator.h"

ABSL_FLAG(std::string, coordinator_binary, "bazel-bin/server/shardwise-coordinator",
          "the shardwise-coordinator to start");
ABSL_FLAG(int32_t, workers, 100, "simulated workers");
ABSL_FLAG(int32_t, jobs, 100, "jobs submitted at once in the load phase");
ABSL_FLAG(int32_t, world_size, 4, "ranks per job");
ABSL_FLAG(int32_t, job_steps, 20, "steps per job");
ABSL_FLAG(int32_t, step_ms, 100, "simulated time per step");
ABSL_FLAG(int32_t, probe_jobs, 20, "jobs submitted one at a time to idle workers");
ABSL_FLAG(int32_t, heartbeat_interval_ms, 1000, "the workers' heartbeat interval");
ABSL_FLAG(int32_t, heartbeat_timeout_ms, 10000, "the coordinator's heartbeat timeout");
ABSL_FLAG(int32_t, progress_interval_ms, 200, "how often rank 0 of a job reports progress");
ABSL_FLAG(int32_t, max_seconds, 600, "the longest the load phase may run");
ABSL_FLAG(int32_t, clients, 0,
          "after the load phase, this many clients call the coordinator at once (submit, "
          "get, list, cancel, watch); 0: none");
ABSL_FLAG(int32_t, client_rounds, 2, "rounds of calls per client");
ABSL_FLAG(bool, markdown_flood_row, false,
          "print one row of the client flood's table on stdout (the report goes to stderr)");
ABSL_FLAG(bool, markdown_row, false,
          "print one row of bench/RESULTS.md's table on stdout (the report goes to stderr)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  shardwise::load::LoadOptions options;
  options.coordinator_binary = absl::GetFlag(FLAGS_coordinator_binary);
  char dir_template[] = "/tmp/shardwise-load.XXXXXX";
  if (mkdtemp(dir_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  options.dir = dir_template;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.jobs = absl::GetFlag(FLAGS_jobs);
  options.world_size = absl::GetFlag(FLAGS_world_size);
  options.job_steps = absl::GetFlag(FLAGS_job_steps);
  options.probe_jobs = absl::GetFlag(FLAGS_probe_jobs);
  options.sim.step_time = absl::Milliseconds(absl::GetFlag(FLAGS_step_ms));
  options.sim.heartbeat_interval = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_interval_ms));
  options.sim.progress_interval = absl::Milliseconds(absl::GetFlag(FLAGS_progress_interval_ms));
  options.heartbeat_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  options.max_duration = absl::Seconds(absl::GetFlag(FLAGS_max_seconds));
  options.clients = absl::GetFlag(FLAGS_clients);
  options.client_rounds = absl::GetFlag(FLAGS_client_rounds);
  auto result = shardwise::load::RunLoad(options);
  if (!result.ok()) {
    std::fprintf(stderr, "coordinator_load: %s (coordinator log: %s/coordinator.log)\n",
                 result.status().ToString().c_str(), options.dir.c_str());
    return 1;
  }
  const std::string report = shardwise::load::FormatLoadResult(options, *result);
  if (absl::GetFlag(FLAGS_markdown_flood_row)) {
    std::fprintf(stderr, "%s", report.c_str());
    std::printf("%s", shardwise::load::FloodMarkdownRow(options, *result).c_str());
  } else if (absl::GetFlag(FLAGS_markdown_row)) {
    std::fprintf(stderr, "%s", report.c_str());
    std::printf("%s", shardwise::load::MarkdownRow(options, *result).c_str());
  } else {
    std::printf("%s", report.c_str());
  }
  return 0;
}
