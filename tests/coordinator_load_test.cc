// The coordinator under a simulated cluster of 200 workers (bench/load/: real gRPC
// sessions, no training) and 100 queued jobs, for a few seconds: every job must run and
// succeed, no session may end, and the only workers declared lost are the three the
// test freezes, each within the heartbeat timeout. The large runs
// (1,000 and 5,000 workers) are benchmarks: bench/coordinator_load.sh.

#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "bench/load/load_generator.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

TEST(CoordinatorLoad, TwoHundredWorkersAndAQueueOfJobsWithoutAFalseFailure) {
  load::LoadOptions options;
  options.coordinator_binary = Cluster::BinaryPath("server/shardwise-coordinator");
  options.dir = testing::ScratchRoot();
  options.workers = 200;
  options.jobs = 100;
  options.world_size = 4;
  options.job_steps = 10;
  options.probe_jobs = 5;
  options.sim.step_time = absl::Milliseconds(50);
  options.sim.heartbeat_interval = absl::Milliseconds(200);
  options.heartbeat_timeout = absl::Seconds(2);
  options.frozen_workers = 3;
  options.max_duration = absl::Minutes(2);
  auto result = load::RunLoad(options);
  ASSERT_TRUE(result.ok()) << result.status();
  std::printf("%s", load::FormatLoadResult(options, *result).c_str());

  // Exactly the workers frozen on purpose are lost, each soon after the timeout: within
  // twice it, a bound that a coordinator checking only now and then would break but a
  // 2-core machine under this load and other tests does not. How soon (the timeout
  // plus the check period and polling) is the benchmark's figure.
  EXPECT_EQ(result->failure_detections, options.frozen_workers);
  EXPECT_EQ(result->workers_lost, options.frozen_workers);
  EXPECT_EQ(result->detection.count, options.frozen_workers);
  EXPECT_LT(result->detection.max, 2 * absl::ToDoubleSeconds(options.heartbeat_timeout));
  EXPECT_EQ(result->sessions_ended, 0) << "the first: " << result->first_session_end;
  EXPECT_EQ(result->jobs_running, options.jobs);
  EXPECT_EQ(result->jobs_succeeded, options.jobs);
  EXPECT_EQ(result->idle_submit_to_running.count, options.probe_jobs);
  // The coordinator measured its own handling of every heartbeat and report it got.
  EXPECT_GT(result->heartbeat.count, 0);
  EXPECT_GT(result->report.count, 2 * options.jobs * options.world_size);
}

}  // namespace
}  // namespace shardwise::testing
