// Registration, gang scheduling and the data-plane bootstrap, with a real coordinator and
// real worker processes over real Gloo.

#include <signal.h>

#include <set>

#include "absl/strings/match.h"
#include "contracts/data_plane_version.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

int64_t EventTime(const v1::Job& job, v1::JobState state) {
  for (const auto& e : job.events()) {
    if (e.state() == state) return e.time_ms();
  }
  return -1;
}

// ... and their release's data-plane version, by which the scheduler gangs them.
TEST(Scheduling, WorkersRegisterWithTheirDevice) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  auto workers = cluster.client().ListWorkers();
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  for (const auto& w : *workers) {
    EXPECT_EQ(w.device(), v1::CPU);
    EXPECT_EQ(w.state(), v1::IDLE);
    EXPECT_GT(w.cpu_threads(), 0);
    EXPECT_GT(w.memory_bytes(), 0);
    EXPECT_EQ(w.data_plane_version(), kDataPlaneVersion);
  }
}

TEST(Scheduling, EveryRankJoinsTheDataPlaneAndVerifiesAnAllReduce) {
  Cluster cluster;
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2"}) cluster.AddWorker(name);
  auto job_id = cluster.client().Submit(Cluster::Spec(3));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1);
  ASSERT_EQ(job.ranks_size(), 3);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(job.ranks(r).rank(), r);
    EXPECT_EQ(job.ranks(r).worker_id(), "w" + std::to_string(r));
  }
  // Every rank checked the bootstrap all-reduce, then trained every step.
  EXPECT_TRUE(absl::StrContains(job.result(), "trained 5 steps")) << job.result();
  EXPECT_EQ(job.progress().step(), 5);
  EXPECT_GT(job.progress().first_loss(), 0);
  EXPECT_GT(EventTime(job, v1::RUNNING), 0) << "the job never reached RUNNING";
  for (const char* name : {"w0", "w1", "w2"}) {
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState(name) == v1::IDLE; }));
  }
}

TEST(Scheduling, JobsCompetingForWorkersRunOneAfterTheOther) {
  Cluster cluster;
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2"}) cluster.AddWorker(name);
  // Two jobs of world 2 on three workers: the second can only start once a rank of the
  // first has completed and freed its worker.
  auto first = cluster.client().Submit(Cluster::Spec(2));
  auto second = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(first.ok() && second.ok());
  v1::Job a = cluster.WaitForState(*first, v1::SUCCEEDED);
  v1::Job b = cluster.WaitForState(*second, v1::SUCCEEDED);
  EXPECT_GE(EventTime(b, v1::SCHEDULED), EventTime(a, v1::RUNNING));
  std::set<std::string> shared;
  for (const auto& rank : a.ranks()) shared.insert(rank.worker_id());
  bool reused = false;
  for (const auto& rank : b.ranks()) reused |= shared.count(rank.worker_id()) > 0;
  EXPECT_TRUE(reused) << "the second job ran on workers the first never held";
  EXPECT_EQ(b.attempt(), 1);
}

TEST(Scheduling, AJobTooLargeForTheClusterWaitsAndCanBeCancelled) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  auto job_id = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(job_id.ok());
  // The scheduler says what the job waits for once it has looked at it.
  const std::string waiting = "waiting for 2 CPU workers, but only 1 is registered";
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.client().Get(*job_id)->reason() == waiting; }))
      << cluster.client().Get(*job_id)->reason();
  EXPECT_EQ(cluster.client().Get(*job_id)->state(), v1::PENDING);

  auto cancelled = cluster.client().Cancel(*job_id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_EQ(cancelled->reason(), "cancelled by request");
  // Idempotent: asked again (a client retrying), the job is returned as it is.
  auto again = cluster.client().Cancel(*job_id);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->state(), v1::CANCELLED);
  EXPECT_EQ(again->events_size(), cancelled->events_size()) << "cancelled twice";

  // A worker arriving later must not pick up the cancelled job: a job submitted after it
  // runs on the two workers to its end (the scheduler has placed what it would), and the
  // cancelled one is as it was.
  cluster.AddWorker("w1");
  auto later = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(later.ok()) << later.status();
  cluster.WaitForState(*later, v1::SUCCEEDED);
  const absl::StatusOr<v1::Job> after = cluster.client().Get(*job_id);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->state(), v1::CANCELLED);
  EXPECT_EQ(after->events_size(), cancelled->events_size());
}

TEST(Scheduling, ACudaJobNeverRunsOnCpuWorkersAndSaysWhatItLacks) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_device(v1::CUDA);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  const std::string waiting = "waiting for 2 CUDA workers (one per GPU), but only 0 are registered";
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.client().Get(*job_id)->reason() == waiting; }))
      << cluster.client().Get(*job_id)->reason();
  EXPECT_EQ(cluster.client().Get(*job_id)->state(), v1::PENDING);
  // The CPU workers stay free for CPU jobs.
  auto cpu_job = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(cpu_job.ok());
  EXPECT_EQ(cluster.WaitForState(*cpu_job, v1::SUCCEEDED).state(), v1::SUCCEEDED);
  EXPECT_EQ(cluster.client().Get(*job_id)->state(), v1::PENDING);
}

TEST(Scheduling, CancellingARunningJobReturnsItsWorkersToIdle) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  // w1 is frozen, so rank 0 waits for it in the rendezvous: the job is mid-bootstrap.
  w1.Signal(SIGSTOP);
  auto job_id = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(job_id.ok());
  cluster.WaitForState(*job_id, v1::SCHEDULED);
  auto cancelled = cluster.client().Cancel(*job_id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w0") == v1::IDLE; }))
      << "rank 0 did not return to idle";
  w1.Signal(SIGCONT);
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w1") == v1::IDLE; }))
      << "rank 1 did not return to idle";
  // Both are usable again.
  auto next = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(next.ok());
  cluster.WaitForState(*next, v1::SUCCEEDED);
}

TEST(Scheduling, CancellingAJobMidTrainingStopsItsRanks) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(1000000);  // far longer than the test
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok());
  ASSERT_TRUE(Cluster::WaitFor([&] {
    auto job = cluster.client().Get(*job_id);
    return job.ok() && job->progress().step() >= 5;
  })) << "training did not start";
  auto cancelled = cluster.client().Cancel(*job_id);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  // Both ranks stop between steps and report idle again.
  for (const char* name : {"w0", "w1"}) {
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState(name) == v1::IDLE; }))
        << name << " did not stop training";
  }
  const int64_t step_at_cancel = cluster.client().Get(*job_id)->progress().step();
  EXPECT_LT(step_at_cancel, 1000000);
}

}  // namespace
}  // namespace shardwise::testing
