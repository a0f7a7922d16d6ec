// Stall detection with real processes: a worker frozen with SIGSTOP mid-training is named
// by the coordinator within the configured time, with where the other ranks wait; with
// the abort timeout set, the job fails with that reason and the other workers return to
// idle (once their blocked collective times out: Gloo has no way to interrupt it).

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

v1::JobSpec LongSpec() {
  v1::JobSpec spec = Cluster::Spec(3);
  spec.set_global_batch_size(24);
  spec.set_steps(10000000);  // only a cancel or the stall abort ends it
  return spec;
}

// The first stall reported among the job's events from `first_event` on.
std::string StallEvent(const v1::Job& job, int first_event) {
  for (int i = first_event; i < job.events_size(); ++i) {
    if (absl::StartsWith(job.events(i).message(), "stall: ")) return job.events(i).message();
  }
  return "";
}

ClusterOptions StallOptions(int64_t abort_ms) {
  ClusterOptions options;
  options.heartbeat_interval_ms = 100;
  options.heartbeat_timeout_ms = 60000;  // the frozen worker must not be lost first
  // Gloo cannot be interrupted inside a collective: ranks blocked there by a frozen peer
  // would wait for the collective timeout; after an abort, workers restart themselves
  // instead (--stuck_abort_restart_ms, 5 s by default).
  options.collective_timeout_ms = 60000;
  options.stall_warning_ms = 1000;
  options.stall_abort_ms = abort_ms;
  return options;
}

void StartTraining(Cluster& cluster, std::string* job_id) {
  auto id = cluster.client().Submit(LongSpec());
  ASSERT_TRUE(id.ok()) << id.status();
  *job_id = *id;
  ASSERT_TRUE(Cluster::WaitFor([&] {
    auto job = cluster.client().Get(*id);
    return job.ok() && job->state() == v1::RUNNING && job->progress().step() >= 5;
  }));
}

TEST(Stall, AFrozenRankIsNamedWithWhereTheOthersWait) {
  Cluster cluster(StallOptions(/*abort_ms=*/0));
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2"}) cluster.AddWorker(name);
  std::string job_id;
  StartTraining(cluster, &job_id);
  const v1::Job running = *cluster.client().Get(job_id);
  int32_t frozen_rank = -1;
  for (const auto& r : running.ranks()) {
    if (r.worker_id() == "w1") frozen_rank = r.rank();
  }
  ASSERT_GE(frozen_rank, 0);
  // A stall reported after the freeze names it (one reported before, while a rank was
  // slow, would name that rank).
  const int events_before = running.events_size();
  cluster.worker("w1").Signal(SIGSTOP);
  std::string event;
  EXPECT_TRUE(Cluster::WaitFor(
      [&] {
        auto job = cluster.client().Get(job_id);
        event = job.ok() ? StallEvent(*job, events_before) : "";
        return !event.empty();
      },
      absl::Seconds(60)))
      << "no stall reported";
  // The frozen rank is named (behind the others, silent, or, frozen before its first
  // heartbeat with a position reached the coordinator, without one). Which ranks wait
  // where depends on how far each got: a ring collective can complete on one rank and not
  // on another when a peer stops in the middle of it.
  EXPECT_TRUE(
      absl::StrContains(event, absl::StrCat("rank ", frozen_rank, " has not entered ")) ||
      absl::StrContains(event, absl::StrCat("rank ", frozen_rank, " has sent no heartbeat")) ||
      absl::StrContains(event,
                        absl::StrCat("rank ", frozen_rank, " has not reported its position")))
      << event;
  EXPECT_TRUE(absl::StrContains(event, " waiting in ")) << event;
  std::string output;
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "describe", job_id}, &output),
            0);
  EXPECT_TRUE(absl::StrContains(output, event)) << output;
  // Thawed, the rank catches up and the job goes on.
  cluster.worker("w1").Signal(SIGCONT);
  const int64_t step = cluster.client().Get(job_id)->progress().step();
  EXPECT_TRUE(
      Cluster::WaitFor([&] { return cluster.client().Get(job_id)->progress().step() > step + 5; }));
  EXPECT_EQ(cluster.client().Get(job_id)->state(), v1::RUNNING);
  ASSERT_TRUE(cluster.client().Cancel(job_id).ok());
}

TEST(Stall, TheAbortTimeoutFailsTheJobAndFreesTheOthers) {
  Cluster cluster(StallOptions(/*abort_ms=*/3000));
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2"}) cluster.AddWorker(name);
  std::string job_id;
  StartTraining(cluster, &job_id);
  cluster.worker("w2").Signal(SIGSTOP);
  v1::Job job = cluster.WaitForState(job_id, v1::FAILED);
  EXPECT_TRUE(absl::StrContains(job.reason(), "stall: rank ")) << job.reason();
  EXPECT_TRUE(absl::StrContains(job.reason(), "longer than the stall timeout of 3s"))
      << job.reason();
  // The survivors, blocked in a collective with the frozen rank, restart themselves (5 s
  // after the abort) and are idle long before the 60 s collective timeout would free
  // them: the wait's bound is half of it, room for a loaded machine.
  EXPECT_TRUE(Cluster::WaitFor(
      [&] {
        return cluster.WorkerState("w0") == v1::IDLE && cluster.WorkerState("w1") == v1::IDLE;
      },
      absl::Seconds(30)))
      << "w0:\n"
      << ReadWholeFile(cluster.worker("w0").log_path()) << "w1:\n"
      << ReadWholeFile(cluster.worker("w1").log_path());
  EXPECT_TRUE(absl::StrContains(ReadWholeFile(cluster.worker("w0").log_path()) +
                                    ReadWholeFile(cluster.worker("w1").log_path()),
                                "restarting this worker"));
  // And they are usable: the frozen one thawed, a new job runs on all three.
  cluster.worker("w2").Signal(SIGCONT);
  EXPECT_TRUE(
      Cluster::WaitFor([&] { return cluster.WorkerState("w2") == v1::IDLE; }, absl::Seconds(20)));
  auto next = cluster.client().Submit(Cluster::Spec(3));
  ASSERT_TRUE(next.ok()) << next.status();
  cluster.WaitForState(*next, v1::SUCCEEDED, absl::Seconds(60));
}

}  // namespace
}  // namespace shardwise::testing
