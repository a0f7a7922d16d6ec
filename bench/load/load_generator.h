#ifndef SHARDWISE_BENCH_LOAD_LOAD_GENERATOR_H_
#define SHARDWISE_BENCH_LOAD_LOAD_GENERATOR_H_

// The coordinator under the load of a cluster: a real coordinator process, N simulated
// workers in this process (sim_worker.h: real gRPC sessions, no training) and a stream
// of clients submitting, getting, listing and watching jobs. In three phases:
//   1. connect: every worker registers and opens its session;
//   2. probe: jobs submitted one at a time while their workers are idle, for the
//      submit-to-RUNNING time of an unloaded queue;
//   3. load: `jobs` jobs submitted at once (most wait in the queue), each watched from
//      submission to its end, while a client lists every job and gets one in a loop.
// It reports what the coordinator measured of itself (heartbeat and report handling,
// from its /metrics), what the clients saw, the coordinator's threads, memory and CPU,
// and whether anything failed that should not have: a worker declared lost, a session
// ended, a job that never ran.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load/client_flood.h"
#include "bench/load/latency.h"
#include "bench/load/sim_worker.h"

namespace shardwise::load {

struct LoadOptions {
  std::string coordinator_binary;
  std::string dir;  // the coordinator's state file and log
  int workers = 100;
  int jobs = 100;  // submitted in the load phase
  int world_size = 4;
  int job_steps = 20;
  int probe_jobs = 10;
  // Workers frozen after the load (their sessions open, no more heartbeats): the
  // coordinator must declare exactly these lost, within its heartbeat timeout.
  int frozen_workers = 10;
  int channels = 0;  // connections the workers share; 0: one per 250 workers
  SimOptions sim;
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  absl::Duration max_duration = absl::Minutes(10);  // for the load phase
  // After the load phase: this many clients at once (client_flood.h), `client_rounds`
  // rounds each; 0: none.
  int clients = 0;
  int client_rounds = 2;
};

struct LoadResult {
  double connect_seconds = 0;  // until every worker was IDLE at the coordinator
  // Handling at the coordinator, arrival to done (its worker_message_seconds histogram:
  // quantiles interpolated within a bucket; max is the top of the highest bucket used).
  Latency heartbeat, report;
  Latency idle_submit_to_running;    // probe phase
  Latency queued_submit_to_running;  // load phase, queueing included
  Latency submit;                    // SubmitJob calls, load phase
  Latency list_jobs;                 // every page of `get jobs`, load phase
  Latency get_job;
  double load_seconds = 0;
  int jobs_running = 0;  // load-phase jobs seen RUNNING (or past it)
  int jobs_succeeded = 0;
  // From a frozen worker's last heartbeat to the coordinator listing it LOST (polled
  // every 50 ms); the timeout plus at most half a heartbeat interval is expected.
  Latency detection;
  double failure_detections = 0;  // the coordinator's count: the frozen workers only
  int workers_lost = 0;           // LOST at the end, the frozen ones included
  int64_t sessions_ended = 0;     // sessions that ended during the load phase
  std::string first_session_end;  // "worker: CODE: message" of the first of them
  int64_t heartbeats_sent = 0, reports_sent = 0;
  int threads_idle = 0, threads_peak = 0;  // the coordinator's
  int64_t rss_idle_bytes = 0, rss_peak_bytes = 0;
  double cpu_percent = 0;  // the coordinator's, over the load phase (100 = one core)
  FloodResult flood;       // with LoadOptions::clients
  int flood_threads_peak = 0;
  int64_t flood_rss_peak_bytes = 0;
};

absl::StatusOr<LoadResult> RunLoad(const LoadOptions& options);

// A human-readable table of `result`, with the options it ran under.
std::string FormatLoadResult(const LoadOptions& options, const LoadResult& result);
// One row of bench/RESULTS.md's table (bench/coordinator_load.sh writes its header).
std::string MarkdownRow(const LoadOptions& options, const LoadResult& result);
// One row of the client flood's table (bench/coordinator_load.sh flood).
std::string FloodMarkdownRow(const LoadOptions& options, const LoadResult& result);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_LOAD_GENERATOR_H_
