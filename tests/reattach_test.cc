// Running training across a coordinator crash, with real processes: the workers train on
// while it is down and re-attach their attempt when it comes back on its state file; an
// attempt missing a rank then is re-queued as before.

#include <signal.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

// A final model's tensors, encoded without metadata; empty if unreadable.
std::string TensorBytes(const std::string& path) {
  auto tensors = ReadSafetensors(path);
  return tensors.ok() ? EncodeSafetensors(*tensors) : "";
}

// Long enough (a few seconds on 2 cores) for a coordinator to die and come back mid-run.
v1::JobSpec LongJob(const std::string& model_path) {
  v1::JobSpec spec = Cluster::Spec(2);
  spec.mutable_model()->clear_layer_widths();
  for (int w : {32, 256, 256, 10}) spec.mutable_model()->add_layer_widths(w);
  spec.set_global_batch_size(64);
  spec.set_steps(800);
  spec.mutable_output()->set_final_model_path(model_path);
  return spec;
}

// LongJob, with a checkpoint every 50 steps.
v1::JobSpec CheckpointedLongJob(const std::string& dir) {
  v1::JobSpec spec = LongJob(dir + "/model.safetensors");
  spec.mutable_output()->set_checkpoint_dir(dir + "/checkpoints");
  spec.mutable_output()->set_checkpoint_interval_steps(50);
  return spec;
}

// The job's rank-0 step, or -1 if the coordinator does not answer.
int64_t StepOf(Cluster& cluster, const std::string& job_id) {
  auto job = cluster.client().Get(job_id);
  return job.ok() ? job->progress().step() : -1;
}

// A coordinator stopped mid-training, by SIGKILL (a crash) or SIGTERM (a rolling update,
// an eviction: never worse than a crash), and restarted on its state file: the ranks
// train on meanwhile and re-attach; the job ends with the model of an uninterrupted run,
// bit for bit, in its first attempt (no step ran again: a step runs only in an attempt,
// and without checkpoints a second attempt would start from step 0).
class CoordinatorStopTest : public ::testing::TestWithParam<int> {};

TEST_P(CoordinatorStopTest, ChangesNothingInTheRun) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  auto straight = cluster.client().Submit(LongJob(cluster.dir() + "/straight.safetensors"));
  ASSERT_TRUE(straight.ok()) << straight.status();
  cluster.WaitForState(*straight, v1::SUCCEEDED, absl::Seconds(120));

  auto job_id = cluster.client().Submit(LongJob(cluster.dir() + "/interrupted.safetensors"));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return StepOf(cluster, *job_id) >= 100; }))
      << "training did not get going";
  // A watch follows the job through the coordinator's absence to its end.
  Client watcher(cluster.address());
  int lost = 0;
  absl::Notification first_update;
  absl::StatusOr<v1::Job> watched = absl::UnknownError("not watched");
  std::thread watching([&] {
    watched = watcher.Watch(
        *job_id,
        [&](const v1::Job&) {
          if (!first_update.HasBeenNotified()) first_update.Notify();
        },
        [&](const absl::Status&) { ++lost; });
  });
  EXPECT_TRUE(first_update.WaitForNotificationWithTimeout(absl::Seconds(20)));
  if (GetParam() == SIGKILL) {
    cluster.KillCoordinator();
  } else {
    cluster.StopCoordinator();
  }
  const int64_t killed_at = StepOf(cluster, *job_id);
  EXPECT_EQ(killed_at, -1);  // it is down
  cluster.StartCoordinator();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  watching.join();
  ASSERT_TRUE(watched.ok()) << watched.status();
  EXPECT_EQ(watched->state(), v1::SUCCEEDED);
  EXPECT_GE(lost, 1) << "the watch never lost its stream";

  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.progress().step(), 800);
  EXPECT_TRUE(HasEvent(job, "waiting up to 30s for its 2 ranks to re-attach"));
  EXPECT_TRUE(HasEvent(job,
                       "all 2 ranks of attempt 1 re-attached after the coordinator "
                       "restarted; training went on without a restart"));
  // The tensors bit for bit (the files' metadata differ: each names its job).
  const std::string expected = TensorBytes(cluster.dir() + "/straight.safetensors");
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(TensorBytes(cluster.dir() + "/interrupted.safetensors") == expected)
      << "the interrupted run's model differs from the uninterrupted one";
  // Both ranks sent their spans to the new coordinator, as attempt 1.
  auto timeline = cluster.client().GetTimeline(*job_id);
  ASSERT_TRUE(timeline.ok()) << timeline.status();
  EXPECT_EQ(timeline->attempt(), 1);
  EXPECT_EQ(timeline->ranks_size(), 2);
  EXPECT_EQ(cluster.WorkerState("w0"), v1::IDLE);
  EXPECT_EQ(cluster.WorkerState("w1"), v1::IDLE);
  // A stopping coordinator says so on every session before it closes them; a killed
  // one cannot.
  for (const char* worker : {"w0", "w1"}) {
    const std::string log = ReadWholeFile(cluster.worker(worker).log_path());
    const bool told =
        log.find("the coordinator is going away (the coordinator is stopping (SIGTERM))") !=
        std::string::npos;
    EXPECT_EQ(told, GetParam() == SIGTERM) << worker << "'s log:\n" << log;
  }
}

INSTANTIATE_TEST_SUITE_P(Reattach, CoordinatorStopTest, ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return info.param == SIGKILL ? "Killed" : "Terminated";
                         });

// A job that finishes while the coordinator is down: the ranks' final reports wait on
// their workers and reach the restarted coordinator, which records the job SUCCEEDED
// with rank 0's result.
TEST(Reattach, AJobThatFinishedWhileTheCoordinatorWasDownSucceeds) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  const std::string model = cluster.dir() + "/model.safetensors";
  auto job_id = cluster.client().Submit(LongJob(model));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return StepOf(cluster, *job_id) >= 100; }));
  cluster.KillCoordinator();
  // Rank 0 writes the final model as the last thing it does.
  ASSERT_TRUE(Cluster::WaitFor([&] { return !ReadWholeFile(model).empty(); }, absl::Seconds(60)));
  cluster.StartCoordinator();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_TRUE(absl::StrContains(job.result(), model)) << job.result();
  EXPECT_TRUE(HasEvent(job, "every rank completed")) << job.DebugString();
}

// A rank frozen while the coordinator was down does not re-attach: after the grace
// period the attempt ends, the rank that came back is aborted, and the job is re-queued
// (not counted against its restart policy) and resumes from its newest checkpoint on the
// workers there are.
TEST(Reattach, AnAttemptMissingARankAfterTheGraceIsRequeuedFromItsCheckpoint) {
  ClusterOptions options;
  // Longer than the workers' longest backoff between reconnections (5 s), so the rank
  // that comes back is in however long the restart took; w1 never comes back.
  options.reattach_grace_ms = 10000;
  Cluster cluster(options);
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = CheckpointedLongJob(cluster.dir());
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return StepOf(cluster, *job_id) >= 120; }));
  cluster.KillCoordinator();
  w1.Signal(SIGSTOP);
  cluster.StartCoordinator();
  cluster.AddWorker("w2");
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "only 1 of 2 ranks re-attached within 10s after the coordinator "
                       "restarted (missing: rank 1 (worker w1))"));
  EXPECT_TRUE(absl::StrContains(job.result(), "resumed from the checkpoint of step"))
      << job.result();
  w1.Signal(SIGCONT);
}

// A worker that died while the coordinator was down (its peer's collectives then fail)
// ends the attempt as a lost rank does today: the surviving rank re-attaches with its
// failure, and the restart policy re-queues the job from its checkpoint.
TEST(Reattach, ARankThatDiedWhileTheCoordinatorWasDownFailsTheAttemptAsToday) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = CheckpointedLongJob(cluster.dir());
  spec.mutable_restart_policy()->set_max_restarts(1);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor([&] { return StepOf(cluster, *job_id) >= 120; }));
  cluster.KillCoordinator();
  w1.Kill();
  cluster.StartCoordinator();
  cluster.AddWorker("w2");
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(120));
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_TRUE(HasEvent(job, "rank 0 (worker w0) failed")) << job.DebugString();
  EXPECT_TRUE(absl::StrContains(job.result(), "resumed from the checkpoint of step"))
      << job.result();
}

}  // namespace
}  // namespace shardwise::testing
