// The coordinator validates the FSDP execution order across real worker processes: ranks
// that agree get their order and prefetch plan recorded and shown; a rank that runs its
// units in another order fails the job within seconds, naming the ranks and the first
// difference, instead of hanging; an order that changes later is warned about exactly once.
// The disagreeing rank is made with the worker's --fault_injection flag.

#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

v1::JobSpec OrderSpec(int world, int steps) {
  v1::JobSpec spec = Cluster::Spec(world);
  spec.mutable_model()->clear_layer_widths();
  for (int w : {8, 16, 16, 12, 4}) spec.mutable_model()->add_layer_widths(w);  // 4 units
  spec.set_global_batch_size(int64_t{8} * world);
  spec.set_steps(steps);
  return spec;
}

int CountEvents(const v1::Job& job, const std::string& text) {
  int n = 0;
  for (const v1::JobEvent& e : job.events()) n += absl::StrContains(e.message(), text);
  return n;
}

TEST(ExecutionOrder, AgreeingRanksGetTheirOrderAndPlanRecorded) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  auto job_id = cluster.client().Submit(OrderSpec(2, 10));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  // Layers 0-3 are units 0-3; the root (unit 4) owns none and is not recorded.
  EXPECT_EQ(job.execution_order().pre_forward_size(), 4);
  EXPECT_EQ(job.prefetch_plan().version(), 1);
  EXPECT_EQ(job.prefetch_plan().backward_prefetch(), v1::BackwardPrefetch::BACKWARD_PRE);
  EXPECT_EQ(CountEvents(job,
                        "execution order recorded, the same on all 2 ranks: "
                        "pre-forward [0, 1, 2, 3], post-forward [0, 1, 2, 3]"),
            1);
  std::string output;
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "describe", *job_id}, &output),
            0);
  EXPECT_TRUE(absl::StrContains(
      output, "Exec order: pre-forward [0, 1, 2, 3], post-forward [0, 1, 2, 3]\n"))
      << output;
  EXPECT_TRUE(absl::StrContains(
      output,
      "Prefetch:   plan v1: backward BACKWARD_PRE [1->0, 2->1, 3->2], forward off, "
      "all-gathers in flight <= 2\n"))
      << output;
}

TEST(ExecutionOrder, ARankWithAnotherOrderFailsTheJobAtOnce) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1", {"--fault_injection=unit_order_reversed"});
  cluster.AddWorker("w2");
  // Many steps: only the validation can end it within the test's time.
  v1::JobSpec spec = OrderSpec(3, 1000000);
  spec.mutable_restart_policy()->set_max_restarts(2);  // a bad order is not retried
  const absl::Time start = absl::Now();
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  // Far inside the million steps' time however loaded the machine (three workers start,
  // connect and run their first iteration).
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(45));
  EXPECT_LT(absl::Now() - start, absl::Seconds(45));
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_TRUE(absl::StrContains(
      job.reason(),
      "the ranks ran their FSDP units in different orders in their first "
      "iteration: rank 1 differs from rank 0 at pre-forward position 0 (unit 0 vs "
      "unit 3)"))
      << job.reason();
  // The other workers are released.
  EXPECT_TRUE(Cluster::WaitFor([&] {
    return cluster.WorkerState("w0") == v1::IDLE && cluster.WorkerState("w2") == v1::IDLE;
  }));
}

TEST(ExecutionOrder, AnOrderThatChangesLaterIsWarnedAboutOnce) {
  Cluster cluster;
  cluster.StartCoordinator();
  // Both ranks hold at step 20 until the coordinator has re-planned: the re-derived plan
  // reaches them while they train, however fast or loaded the machine.
  const std::string release = cluster.dir() + "/release";
  for (const char* name : {"w0", "w1"}) {
    cluster.AddWorker(
        name, {"--fault_injection=unit_order_reversed_from=3,hold_at=20:forward:" + release});
  }
  auto job_id = cluster.client().Submit(OrderSpec(2, 1000));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor(
      [&] {
        auto job = cluster.client().Get(*job_id);
        return job.ok() && job->prefetch_plan().version() == 2;
      },
      absl::Seconds(60)))
      << "no plan re-derived from the changed order";
  std::ofstream(release).put('\n');
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
  EXPECT_EQ(CountEvents(job, "execution order changed"), 1);
  EXPECT_EQ(CountEvents(job,
                        "execution order changed at step 3: pre-forward position 0 "
                        "(unit 0 vs unit 3)"),
            1);
  EXPECT_EQ(job.prefetch_plan().version(), 2);  // re-planned from the new order
  EXPECT_EQ(job.prefetch_plan().backward_target(0), 1);
  // Every rank adopted version 2 at one step after the change (they agree on it in the
  // step's loss all-reduce, so rank 0's progress speaks for all), and the job went on.
  EXPECT_EQ(job.state(), v1::SUCCEEDED) << job.reason();
  EXPECT_EQ(job.progress().prefetch_plan_version(), 2);
  EXPECT_GT(job.progress().prefetch_plan_since_step(), 3);
  EXPECT_LT(job.progress().prefetch_plan_since_step(), job.progress().total_steps());
}

}  // namespace
}  // namespace shardwise::testing
