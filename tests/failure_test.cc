// Failures with real processes: workers killed or frozen mid-job, restart policies, a
// coordinator killed and restarted on its SQLite file, and a second coordinator on it.

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

// Why a worker cannot be started as on another host here (empty when it can): that
// needs root and unshare -m, a mount namespace standing for another host.
std::string WhyNoOtherHost() {
  std::string unshare;
  if (geteuid() == 0 && RunShell("unshare -m true", &unshare) == 0) return "";
  return "needs root and unshare -m (a mount namespace stands for another host): " + unshare;
}

// A worker's launcher (Cluster::AddWorker) that runs it in a mount namespace of its own
// where `folder` is an empty tmpfs: a host without the volume that holds it.
std::vector<std::string> OnAHostWithout(const std::string& folder) {
  return {"/usr/bin/unshare",
          "-m",
          "--propagation",
          "private",
          "/bin/sh",
          "-c",
          "mount -t tmpfs no-volume \"$0\" && exec \"$@\"",
          folder};
}

TEST(Failure, AWorkerKilledMidJobFailsTheJobNamingItsRank) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(int64_t{1} << 30);  // trains until its worker is killed
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok());
  cluster.WaitForState(*job_id, v1::RUNNING);
  w1.Kill();
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_TRUE(absl::StrContains(job.reason(), "rank 1 (worker w1) was lost")) << job.reason();
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w0") == v1::IDLE; }));
  EXPECT_EQ(cluster.WorkerState("w1"), v1::LOST);
}

// What Kubernetes does to a pod it moves: SIGTERM, then a grace period. The worker
// aborts its attempt and says so before it leaves, so the job is re-queued at once,
// naming why, rather than the worker being found gone.
TEST(Failure, AWorkerToldToStopAbortsItsAttemptAndSaysSoBeforeLeaving) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(int64_t{1} << 30);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok());
  cluster.WaitForState(*job_id, v1::RUNNING);
  const absl::Time signalled = absl::Now();
  w1.Signal(SIGTERM);
  EXPECT_EQ(w1.Wait(), 0);
  // Promptly, not after the 30 s collective timeout a peer would otherwise wait out.
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(25));
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_TRUE(absl::StrContains(job.reason(),
                                "rank 1 (worker w1) failed: aborted: the worker "
                                "is shutting down"))
      << job.reason();
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w0") == v1::IDLE; }));
}

TEST(Failure, AFrozenWorkerIsLostAfterTheHeartbeatTimeout) {
  ClusterOptions options;
  options.heartbeat_timeout_ms = 3000;  // fifteen heartbeats: no live worker is lost first
  Cluster cluster(options);
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(int64_t{1} << 30);  // trains until its worker freezes
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok());
  cluster.WaitForState(*job_id, v1::RUNNING);
  w1.Signal(SIGSTOP);  // its TCP connection stays open: only heartbeats can tell
  v1::Job job = cluster.WaitForState(*job_id, v1::FAILED, absl::Seconds(60));
  EXPECT_TRUE(absl::StrContains(job.reason(),
                                "rank 1 (worker w1) was lost: no heartbeat for "
                                "more than 3s"))
      << job.reason();
  w1.Signal(SIGCONT);
  // Once it runs again it reconnects and is schedulable.
  EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState("w1") == v1::IDLE; }));
}

// The daemons' heartbeats count the messages their session reader took: with an unread
// timeout of 2 s, a worker whose count left its assignment out would be lost within
// seconds of the job starting (the bound leaves ten heartbeats' slack for a coordinator
// whose session reader waits behind a report's fsync on a loaded machine). Each worker's count
// reaches its assignment while the job runs on its first attempt, and later the cancel's abort
// (another message) too.
TEST(Failure, WorkersThatReadTheirMessagesAreNeverLostForThem) {
  ClusterOptions options;
  options.coordinator_flags = {"--unread_timeout_ms=2000"};
  Cluster cluster(options);
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(int64_t{1} << 30);  // trains until cancelled
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::RUNNING);
  // The counts the coordinator judges by: every message sent (at least `sent`) read.
  auto read_all = [&](const char* name, int64_t sent) {
    return Cluster::WaitFor([&] {
      std::optional<v1::WorkerInfo> worker = cluster.Worker(name);
      return worker.has_value() && worker->session_messages_sent() >= sent &&
             worker->session_messages_read() == worker->session_messages_sent();
    });
  };
  for (const char* name : {"w0", "w1"}) EXPECT_TRUE(read_all(name, 1)) << name;
  const v1::Job trained = *cluster.client().Get(*job_id);
  ASSERT_EQ(trained.state(), v1::RUNNING) << trained.reason();
  EXPECT_EQ(trained.attempt(), 1);
  ASSERT_TRUE(cluster.client().Cancel(*job_id).ok());
  cluster.WaitForState(*job_id, v1::CANCELLED);
  for (const char* name : {"w0", "w1"}) {
    EXPECT_TRUE(Cluster::WaitFor([&] { return cluster.WorkerState(name) == v1::IDLE; })) << name;
    EXPECT_TRUE(read_all(name, 2)) << name;
  }
}

TEST(Failure, ARestartPolicyReQueuesTheJobOnOtherWorkers) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  // w1 holds its rank at step 2 (a file never made): the job is RUNNING when it dies.
  Process& w1 = cluster.AddWorker(
      "w1", {"--fault_injection=hold_at=2:forward:" + cluster.dir() + "/never-made"});
  v1::JobSpec spec = Cluster::Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(1);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok());
  v1::Job running = cluster.WaitForState(*job_id, v1::RUNNING);
  ASSERT_EQ(running.ranks(1).worker_id(), "w1");
  ASSERT_TRUE(Cluster::WaitFor([&] {
    return absl::StrContains(ReadWholeFile(w1.log_path()), "fault injection: held at forward");
  }));
  cluster.AddWorker("w2");  // idle only now: the first attempt could not take it
  w1.Kill();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  bool requeued = false;
  for (const auto& e : job.events()) {
    requeued |= e.state() == v1::PENDING &&
                absl::StrContains(e.message(), "rank 1 (worker w1) was lost") &&
                absl::StrContains(e.message(), "re-queued (restart 1 of 1)");
  }
  EXPECT_TRUE(requeued) << "no re-queue event";
}

// A worker that died before its rank joined (stopped, then killed, while the job is
// SCHEDULED: a node that lost power looks the same) costs the job no restart, as one that
// never reached the rendezvous: it is quarantined and the job runs elsewhere, with its
// default of no restarts.
TEST(Failure, AWorkerLostBeforeItsRankJoinedIsQuarantinedAndTheJobRunsElsewhere) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  cluster.AddWorker("w2");
  w1.Signal(SIGSTOP);  // hold the job mid-bootstrap: rank 0 waits for rank 1
  auto job_id = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(job_id.ok());
  v1::Job scheduled = cluster.WaitForState(*job_id, v1::SCHEDULED);
  ASSERT_EQ(scheduled.ranks(1).worker_id(), "w1");
  w1.Kill();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_TRUE(absl::StrContains(JobEventLog(job), "rank 1 (worker w1) was lost before it joined"))
      << JobEventLog(job);
}

// A host without the data volume: worker w1 runs in a mount namespace of its own, where
// the folder holding the job's tokens is an empty tmpfs. Its rank finds the input
// missing, rank 0 (on a host with it) reaches the rendezvous: w1 is quarantined and the
// job runs on w0 and w2, no restart counted, instead of failing for good.
TEST(Failure, AWorkerWhoseHostLacksTheInputsIsQuarantinedAndTheJobRunsElsewhere) {
  if (const std::string why = WhyNoOtherHost(); !why.empty()) GTEST_SKIP() << why;
  Cluster cluster;
  cluster.StartCoordinator();
  const std::string data = cluster.dir() + "/data";
  std::filesystem::create_directories(data);
  const std::vector<uint16_t> ids(4096, 7);
  std::ofstream(data + "/train.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()),
             static_cast<std::streamsize>(ids.size() * sizeof(uint16_t)));
  cluster.AddWorker("w0");
  cluster.AddWorker("w1", {}, OnAHostWithout(data));
  auto job_id =
      cluster.client().Submit(Cluster::WithSmallGpt(Cluster::Spec(2), 16, data + "/train.bin"));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(Cluster::WaitFor([&] {
    const auto w1 = cluster.Worker("w1");
    return w1.has_value() && w1->quarantined_until_ms() > 0;
  })) << "w1 was not quarantined; see "
      << cluster.worker("w1").log_path();
  EXPECT_TRUE(absl::StrContains(cluster.Worker("w1")->quarantine_reason(),
                                "could not find the job's inputs on its host"))
      << cluster.Worker("w1")->quarantine_reason();
  cluster.AddWorker("w2");
  const v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  for (const v1::RankAssignment& rank : job.ranks()) EXPECT_NE(rank.worker_id(), "w1");
  // Whichever rank w1 had: "rank R (worker w1) could not find ..., where rank R' found".
  EXPECT_TRUE(HasEvent(job, "(worker w1) could not find the job's inputs on its host, where rank "))
      << JobEventLog(job);
  EXPECT_TRUE(
      HasEvent(job, " found theirs (a volume not mounted there?): job.data.tokens.train_path: '" +
                        data + "/train.bin': no readable file at this path"))
      << JobEventLog(job);
}

// A worker stopped (SIGTERM) while its rank waits in a collective on a frozen peer: the
// rank cannot be interrupted, so once the drain's grace is over the worker exits 0
// without waiting for it, well before the collective's own timeout (30 s here). The stop
// waits until the coordinator reports the stall (a rank in a collective for a second):
// stopped at once, the rank could be between collectives and end on its own; and the peer
// is frozen only after a few steps, when the ranks are connected (a rank waiting for a
// peer's connection is in no collective).
TEST(Failure, AStoppedWorkerDoesNotWaitForACollectiveOnAFrozenPeer) {
  ClusterOptions options;
  options.stall_warning_ms = 1000;
  Cluster cluster(options);
  cluster.StartCoordinator();
  Process& w0 = cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(100000000);  // trains until stopped
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::RUNNING);
  // Past the rendezvous and the data plane's connection (a frozen peer there is no stall).
  ASSERT_TRUE(cluster.WaitForStep(*job_id, 2)) << "the job made no progress";
  // A stall reported after the freeze has w0 waiting (one reported before, while a rank
  // was slow, would not).
  const absl::StatusOr<v1::Job> before = cluster.client().Get(*job_id);
  ASSERT_TRUE(before.ok()) << before.status();
  const int events_before = before->events_size();
  w1.Signal(SIGSTOP);
  ASSERT_TRUE(Cluster::WaitFor([&] {
    const absl::StatusOr<v1::Job> job = cluster.client().Get(*job_id);
    if (!job.ok()) return false;
    for (int i = events_before; i < job->events_size(); ++i) {
      if (absl::StartsWith(job->events(i).message(), "stall: ")) return true;
    }
    return false;
  })) << "no stall reported";
  w0.Signal(SIGTERM);
  EXPECT_TRUE(Cluster::WaitFor([&] { return !w0.Running(); }, absl::Seconds(20)))
      << "w0 waited for its collective";
  EXPECT_EQ(w0.Wait(), 0);
  EXPECT_TRUE(absl::StrContains(ReadWholeFile(w0.log_path()), "exiting without waiting for it"));
  w1.Signal(SIGCONT);
}

// A worker that takes its rank and never joins the rendezvous (hung, or unable to reach
// it): found by the job's join deadline, not the data plane's minute-long timeout; blamed
// by rank and worker; quarantined, so the job's next attempt (not counted as a restart)
// runs on another worker and completes.
TEST(Failure, AWorkerThatNeverJoinsIsBlamedQuarantinedAndTheJobRunsElsewhere) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1", {"--fault_injection=never_join_rendezvous"});
  cluster.AddWorker("w2");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.mutable_rendezvous()->set_join_timeout_seconds(3);
  const absl::Time start = absl::Now();
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_EQ(cluster.WaitForState(*job_id, v1::SCHEDULED).ranks(1).worker_id(), "w1");
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(40));
  EXPECT_LT(absl::Now() - start, absl::Seconds(40));  // the data plane's own timeout: 60 s
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_TRUE(HasEvent(job,
                       "rank 1 (worker w1) did not reach the rendezvous within 3 s "
                       "(rendezvous.join_timeout_seconds); quarantined for 10m"))
      << JobEventLog(job);
  std::string workers;
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "get", "workers"}, &workers), 0);
  EXPECT_TRUE(absl::StrContains(workers, "quarantined for")) << workers;

  // A coordinator that crashes and starts again keeps the quarantine (the state file
  // holds it): w1 registers again, is shown quarantined, and the next job runs without it.
  cluster.KillCoordinator();
  cluster.StartCoordinator();
  ASSERT_TRUE(Cluster::WaitFor([&] {
    return cluster.WorkerState("w0") == v1::IDLE && cluster.WorkerState("w1") == v1::IDLE &&
           cluster.WorkerState("w2") == v1::IDLE;
  })) << "the workers did not come back";
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "get", "workers"}, &workers), 0);
  EXPECT_TRUE(absl::StrContains(workers, "quarantined for")) << workers;
  auto next = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(next.ok()) << next.status();
  const v1::Job after_restart = cluster.WaitForState(*next, v1::SUCCEEDED, absl::Seconds(40));
  // Had w1 been scheduled, the join deadline would have re-queued the job (attempt 2).
  EXPECT_EQ(after_restart.attempt(), 1);
  for (const v1::RankAssignment& rank : after_restart.ranks()) {
    EXPECT_NE(rank.worker_id(), "w1") << "the quarantined worker was scheduled after a restart";
  }
  EXPECT_FALSE(HasEvent(after_restart, "did not reach the rendezvous"))
      << JobEventLog(after_restart);
}

TEST(Failure, ARestartedAttemptResumesFromTheJobsLatestCheckpoint) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  cluster.AddWorker("w2");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(400);
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_output()->set_checkpoint_dir(cluster.dir() + "/checkpoints");
  spec.mutable_output()->set_checkpoint_interval_steps(20);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  // Let it pass a few checkpoints, then kill rank 1 mid-training.
  ASSERT_TRUE(cluster.WaitForStep(*job_id, 60)) << "training did not get going";
  w1.Kill();
  v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  EXPECT_TRUE(absl::StrContains(job.result(), "resumed from the checkpoint of step"))
      << job.result();
  EXPECT_EQ(job.progress().step(), 400);
  EXPECT_EQ(job.checkpoint_step(), 400);  // the newest a rank reported
}

// A later attempt's rank on a host that does not see the job's checkpoints (worker w2 in
// a mount namespace of its own, where the checkpoint folder is an empty tmpfs) reports
// the input missing before it joins, rather than train the job again from its start:
// rank 0 found them, so w2 is quarantined and the job resumes on w0 and w3, the one
// restart the lost worker cost counted, no more.
TEST(Failure, AWorkerWhoseHostDoesNotSeeTheJobsCheckpointsIsQuarantined) {
  if (const std::string why = WhyNoOtherHost(); !why.empty()) GTEST_SKIP() << why;
  Cluster cluster;
  cluster.StartCoordinator();
  const std::string checkpoints = cluster.dir() + "/checkpoints";
  std::filesystem::create_directories(checkpoints);
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(400);
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_output()->set_checkpoint_dir(checkpoints);
  spec.mutable_output()->set_checkpoint_interval_steps(20);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  ASSERT_TRUE(cluster.WaitForStep(*job_id, 60)) << "training did not get going";
  ASSERT_TRUE(Cluster::WaitFor([&] {
    return cluster.client().Get(*job_id).value_or(v1::Job()).checkpoint_step() >= 20;
  })) << "no checkpoint reported";
  cluster.AddWorker("w2", {}, OnAHostWithout(checkpoints));
  w1.Kill();
  ASSERT_TRUE(Cluster::WaitFor([&] {
    const auto w2 = cluster.Worker("w2");
    return w2.has_value() && w2->quarantined_until_ms() > 0;
  })) << "w2 was not quarantined; see "
      << cluster.worker("w2").log_path();
  cluster.AddWorker("w3");
  const v1::Job job = cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
  EXPECT_EQ(job.attempt(), 3);
  EXPECT_EQ(job.restarts(), 1);
  for (const v1::RankAssignment& rank : job.ranks()) EXPECT_NE(rank.worker_id(), "w2");
  EXPECT_TRUE(absl::StrContains(job.result(), "resumed from the checkpoint of step"))
      << job.result();
  EXPECT_TRUE(HasEvent(job, "(worker w2) could not find the job's inputs on its host, where rank "))
      << JobEventLog(job);
  EXPECT_TRUE(HasEvent(job, "job.output.checkpoint_dir: '" + checkpoints +
                                "': none of the job's checkpoints on this host, but the job "
                                "wrote its checkpoint of step "))
      << JobEventLog(job);
}

// The worker is up and runs the next job.
void ExpectTheWorkerServesOn(Cluster& cluster, Process& worker) {
  EXPECT_TRUE(worker.Running());
  auto next = cluster.client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(next.ok()) << next.status();
  cluster.WaitForState(*next, v1::SUCCEEDED);
}

// A one-rank MLP with a 4 GiB layer (1 G parameters).
v1::JobSpec FourGibLayerSpec() {
  v1::JobSpec big = Cluster::Spec(1);
  big.mutable_model()->clear_layer_widths();
  for (int w : {65536, 16384, 10}) big.mutable_model()->add_layer_widths(w);
  return big;
}

// A job whose sizes pass validation but do not fit a worker's memory (here a worker
// limited to 3 GiB of address space, and a 4 GiB layer) fails its attempt with a reason
// that says so; the worker lives on and runs the next job. With its own check off, the
// worker meets the failure where it happens, in an allocation.
TEST(Failure, AJobTooLargeForAWorkersMemoryFailsAndTheWorkerServesOn) {
  Cluster cluster;
  cluster.StartCoordinator();
  Process& worker =
      cluster.AddWorker("small", {"--check_memory=false"}, {"/usr/bin/prlimit", "--as=3221225472"});
  auto job = cluster.client().Submit(FourGibLayerSpec());
  ASSERT_TRUE(job.ok()) << job.status();
  // Filling gigabytes until the limit takes long on a loaded machine: the bound is loose.
  const v1::Job failed = cluster.WaitForState(*job, v1::FAILED, absl::Minutes(3));
  EXPECT_TRUE(
      absl::StrContains(failed.reason(), "rank 0 (worker small) failed: out of memory while "))
      << failed.reason();
  ExpectTheWorkerServesOn(cluster, worker);
}

// A host out of threads (a pids cgroup's limit) makes std::thread throw inside training:
// the attempt fails saying so, is re-queued, and the next one trains on the same worker,
// which served on (an escaped exception would have ended it, and its ranks).
TEST(Failure, AThreadThatCannotStartFailsTheAttemptNotTheWorker) {
  Cluster cluster;
  cluster.StartCoordinator();
  Process& worker = cluster.AddWorker("w0", {"--fault_injection=no_thread_at=2:forward"});
  v1::JobSpec spec = Cluster::Spec(1);
  spec.mutable_restart_policy()->set_max_restarts(1);
  auto job = cluster.client().Submit(spec);
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::Job done = cluster.WaitForState(*job, v1::SUCCEEDED);
  EXPECT_EQ(done.restarts(), 1);
  EXPECT_TRUE(HasEvent(done, "rank 0 (worker w0) failed: this worker could not start a thread"))
      << JobEventLog(done);
  EXPECT_TRUE(worker.Running());
}

// With its check on (the default), the same worker refuses the rank before allocating
// anything, naming the estimate and what it has left.
TEST(Failure, AWorkerRefusesARankItHasNoMemoryForBeforeItStarts) {
  Cluster cluster;
  cluster.StartCoordinator();
  Process& worker = cluster.AddWorker("small", {}, {"/usr/bin/prlimit", "--as=3221225472"});
  auto job = cluster.client().Submit(FourGibLayerSpec());
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::Job failed = cluster.WaitForState(*job, v1::FAILED);
  EXPECT_TRUE(absl::StrContains(failed.reason(), "rank 0 needs about ")) << failed.reason();
  EXPECT_TRUE(absl::StrContains(failed.reason(), "(parameters 4.0 GiB, ")) << failed.reason();
  EXPECT_TRUE(absl::StrContains(failed.reason(),
                                " of host memory available; the attempt did "
                                "not start"))
      << failed.reason();
  ExpectTheWorkerServesOn(cluster, worker);
}

// A job whose estimated memory per rank exceeds what every registered worker of its
// kind advertises (here: activations of twice this host's memory) is refused at
// submission, naming the estimate and the largest worker; a job submitted before any
// worker of its kind registers waits instead.
TEST(Failure, AJobNoWorkerHasTheMemoryForIsRefusedAtSubmission) {
  Cluster cluster;
  cluster.StartCoordinator();
  v1::JobSpec huge = FourGibLayerSpec();
  const double physical = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const double row_bytes = 4.0 * (65536 + 10 + 2 * (16384 + 10));
  int64_t rows = 1;
  while (rows * row_bytes < 2 * physical) rows *= 2;
  huge.set_global_batch_size(rows);
  auto queued = cluster.client().Submit(huge);
  ASSERT_TRUE(queued.ok()) << "no worker registered yet: " << queued.status();
  cluster.AddWorker("w0");
  ASSERT_TRUE(Cluster::WaitFor([&] {
    auto job = cluster.client().Get(*queued);
    return job.ok() && absl::StrContains(job->reason(), "advertise that much");
  })) << cluster.client().Get(*queued)->reason();
  auto refused = cluster.client().Submit(huge);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "the job needs about "))
      << refused.status();
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "but the largest CPU worker (w0) advertises "))
      << refused.status();
  // The queued job holds the CPU queue (no backfilling) until it is cancelled.
  auto fits = cluster.client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_TRUE(cluster.client().Cancel(*queued).ok());
  cluster.WaitForState(*fits, v1::SUCCEEDED);
}

// A 4 MiB tmpfs to hold a state file and fill (mounting needs root), unmounted at the end.
struct SmallDisk {
  SmallDisk() : path(absl::StrCat("/tmp/shardwise-full-disk-", getpid())) {
    std::filesystem::create_directories(path);
    mounted = std::system(absl::StrCat("mount -t tmpfs -o size=4m tmpfs ", path).c_str()) == 0;
  }
  ~SmallDisk() {
    if (mounted) std::system(absl::StrCat("umount ", path).c_str());
  }
  // Fills the file system (dd stops with "No space left on device").
  void Fill() const {
    std::system(absl::StrCat("dd if=/dev/zero of=", path, "/filler bs=64k 2>/dev/null").c_str());
  }
  void MakeRoom() const { std::filesystem::remove(path + "/filler"); }
  std::string path;
  bool mounted = false;
};

// Whether the coordinator's health service `service` ("" is readiness) answers SERVING.
bool Serving(const Cluster& cluster, const std::string& service = "") {
  auto health = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(cluster.address(), grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  return health->Check(&context, request, &response).ok() &&
         response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// A two-rank job whose end comes while its coordinator's state file is on a full file
// system (a small tmpfs: mounting needs root). SetUp returns once the coordinator reports
// NOT_SERVING with the job's end unwritten. Rank 0 holds at step 250 until the disk is
// full (--fault_injection=hold_at), so the job cannot end before, however loaded the
// machine.
class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs for the state file";
    ASSERT_TRUE(disk_.mounted);
    ClusterOptions options;
    options.state_file = disk_.path + "/state.db";
    options.coordinator_metrics = true;
    cluster_ = std::make_unique<Cluster>(options);
    cluster_->StartCoordinator();
    const std::string disk_full = cluster_->dir() + "/disk-full";
    cluster_->AddWorker("w0", {"--fault_injection=hold_at=250:forward:" + disk_full});
    cluster_->AddWorker("w1");
    ASSERT_TRUE(Serving(*cluster_));
    v1::JobSpec spec = Cluster::Spec(2);
    spec.set_steps(300);
    auto job_id = cluster_->client().Submit(spec);
    ASSERT_TRUE(job_id.ok()) << job_id.status();
    job_id_ = *job_id;
    ASSERT_TRUE(Cluster::WaitFor([&] {
      return absl::StrContains(ReadWholeFile(cluster_->worker("w0").log_path()),
                               "fault injection: held at forward of step 250");
    })) << "the job did not get to step 250";
    disk_.Fill();
    std::ofstream(disk_full).put('\n');
    ASSERT_TRUE(Cluster::WaitFor([&] { return !Serving(*cluster_); }, absl::Seconds(60)))
        << "the coordinator never reported the unwritable state file";
  }

  SmallDisk disk_;
  std::unique_ptr<Cluster> cluster_;
  std::string job_id_;
};

// A state file that cannot be written loses nothing: the job that finished meanwhile is
// not left RUNNING for good. Clients keep seeing what was written, the coordinator
// reports NOT_SERVING, and once space is back the change is written, with an event
// saying it came late.
TEST_F(FullDisk, DelaysChangesWithoutLosingThem) {
  Cluster& cluster = *cluster_;
  // Not ready, but alive: a liveness probe must not restart it and lose what it holds.
  EXPECT_TRUE(Serving(cluster, "liveness"));
  // The job finished on the workers, but the change is not written: clients still see
  // the written state, and the workers are free.
  EXPECT_EQ(cluster.client().Get(job_id_)->state(), v1::RUNNING);
  disk_.MakeRoom();
  const v1::Job done = cluster.WaitForState(job_id_, v1::SUCCEEDED, absl::Seconds(10));
  EXPECT_TRUE(Cluster::WaitFor([&] { return Serving(cluster); }));
  bool noted = false;
  for (const v1::JobEvent& event : done.events()) {
    noted |= absl::StrContains(event.message(), "reached the state file") &&
             absl::StrContains(event.message(), "late");
  }
  EXPECT_TRUE(noted) << done.DebugString();
  // And it survives a restart: it was really written.
  cluster.KillCoordinator();
  cluster.StartCoordinator();
  EXPECT_EQ(cluster.client().Get(job_id_)->state(), v1::SUCCEEDED);
}

// SubmitJob calls the coordinator answered UNAVAILABLE, from its /metrics.
int64_t SubmissionsRefusedForNow(const Cluster& cluster) {
  httplib::Client metrics("127.0.0.1", cluster.coordinator_metrics_port());
  auto scrape = metrics.Get("/metrics");
  if (!scrape || scrape->status != 200) return -1;
  for (absl::string_view line : absl::StrSplit(scrape->body, '\n')) {
    if (!absl::StrContains(line, "SubmitJob") || !absl::StrContains(line, "code=\"UNAVAILABLE\"")) {
      continue;
    }
    int64_t count = 0;
    if (absl::SimpleAtoi(line.substr(line.rfind(' ') + 1), &count)) return count;
  }
  return 0;
}

// A submission the coordinator refuses because its state file refuses writes is told so
// (not "cannot reach the coordinator") once the client's budget is spent, and within it
// is asked again: one made while the disk is full lands once there is room.
TEST_F(FullDisk, ASubmissionIsRefusedForNowAndLandsOnceThereIsRoom) {
  ClientOptions impatient;
  impatient.call_budget = absl::Seconds(1);
  auto refused = Client(cluster_->address(), impatient).Submit(Cluster::Spec(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::StrContains(refused.status().message(), "the coordinator cannot write its state file"))
      << refused.status();
  const int64_t refusals = SubmissionsRefusedForNow(*cluster_);
  EXPECT_GT(refusals, 0);
  absl::StatusOr<std::string> landed;
  std::thread submit([&] { landed = Client(cluster_->address()).Submit(Cluster::Spec(1)); });
  // Past gRPC's own five attempts: the client asked again itself.
  const bool refused_again =
      Cluster::WaitFor([&] { return SubmissionsRefusedForNow(*cluster_) > refusals + 5; });
  disk_.MakeRoom();
  submit.join();
  EXPECT_TRUE(refused_again);
  ASSERT_TRUE(landed.ok()) << landed.status();
  cluster_->WaitForState(*landed, v1::SUCCEEDED);
}

// A coordinator stopped (SIGTERM) while the state file still refuses a change tries it
// once more and, refused again, names the change it loses in its log (the next start
// reads the job as the state file holds it), and exits 1: the loss is no clean stop.
TEST_F(FullDisk, AStopWithAChangeUnwrittenNamesItInTheLog) {
  EXPECT_EQ(cluster_->StopCoordinator(), 1);
  std::ifstream log(absl::StrCat(cluster_->dir(), "/coordinator-1.log"));
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_TRUE(absl::StrContains(
      text.str(), absl::StrCat("shutting down with a change unwritten, lost: job ", job_id_, ": ")))
      << text.str();
  EXPECT_TRUE(absl::StrContains(text.str(), "(the state file holds RUNNING")) << text.str();
  EXPECT_TRUE(absl::StrContains(text.str(), "job changes the state file '")) << text.str();
  EXPECT_TRUE(absl::StrContains(text.str(), "' refused are lost with this process")) << text.str();
}

// A Watch on the plaintext health port stays open until its client cancels it: a stop
// (SIGTERM) still ends within the servers' grace, where a shutdown without a deadline
// waited for it for good (a second signal does nothing more).
TEST(Failure, AnOpenHealthWatchDoesNotHoldUpAStop) {
  ClusterOptions options;
  options.health_port = true;
  Cluster cluster(options);
  cluster.StartCoordinator();
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", cluster.health_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;  // "": the server as a whole
  auto watch = health->Watch(&context, request);
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  ASSERT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  absl::Notification stopped;
  std::thread stop([&] {
    cluster.StopCoordinator();
    stopped.Notify();
  });
  const bool in_time = stopped.WaitForNotificationWithTimeout(absl::Seconds(30));
  if (!in_time) ::kill(cluster.coordinator_pid(), SIGKILL);  // so that the test ends, failed
  stop.join();
  EXPECT_TRUE(in_time) << "the coordinator was still stopping 30 s after SIGTERM";
  context.TryCancel();
}

// The health port is plaintext and open to the node: it serves the health service alone,
// not the server reflection the main port serves (which would list every service and
// hand out their schemas).
TEST(Failure, TheHealthPortServesNoReflection) {
  ClusterOptions options;
  options.health_port = true;
  Cluster cluster(options);
  cluster.StartCoordinator();
  const auto reflection_answer = [](const std::string& address) {
    grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    // An empty request message: a ByteBuffer of one empty slice (one of none is no
    // message at all).
    grpc::Slice empty("");
    grpc::ByteBuffer request(&empty, 1), response;
    grpc::Status answer;
    absl::Notification done;
    stub.UnaryCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                   grpc::StubOptions(), &request, &response, [&](grpc::Status status) {
                     answer = std::move(status);
                     done.Notify();
                   });
    done.WaitForNotification();
    return answer.error_code();
  };
  EXPECT_EQ(reflection_answer(absl::StrCat("127.0.0.1:", cluster.health_port())),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(reflection_answer(cluster.address()), grpc::StatusCode::UNIMPLEMENTED);
}

// Two coordinators on one state file would hand out the same job ids from their own views
// of it: the second one exits at once, naming the first one's pid, and the first serves
// on unharmed.
TEST(Failure, ASecondCoordinatorOnTheSameStateFileExitsNamingTheFirst) {
  Cluster cluster;
  cluster.StartCoordinator();
  Process second({Cluster::BinaryPath("server/shardwise-coordinator"), "--address=127.0.0.1:0",
                  "--state_file=" + cluster.dir() + "/state.db"},
                 cluster.dir() + "/second-coordinator.log");
  EXPECT_EQ(second.Wait(), 1);
  std::ifstream log(second.log_path());
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), absl::StrCat("is in use by another coordinator (pid ",
                                                         cluster.coordinator_pid(), ",")))
      << text.str();
  cluster.AddWorker("w0");
  auto job = cluster.client().Submit(Cluster::Spec(1));
  ASSERT_TRUE(job.ok()) << job.status();
  cluster.WaitForState(*job, v1::SUCCEEDED);
}

TEST(Failure, ACoordinatorKilledAndRestartedKeepsEveryJob) {
  Cluster cluster;
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  Process& w1 = cluster.AddWorker("w1");
  auto done = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(done.ok());
  cluster.WaitForState(*done, v1::SUCCEEDED);
  // Too large for the cluster, then cancelled: a CANCELLED record to keep. (Left pending,
  // it would hold back every job behind it: the scheduler does not backfill.)
  auto waiting = cluster.client().Submit(Cluster::Spec(5));
  ASSERT_TRUE(waiting.ok());
  ASSERT_TRUE(cluster.client().Cancel(*waiting).ok());
  w1.Signal(SIGSTOP);  // holds the next job mid-bootstrap
  auto running = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(running.ok());
  cluster.WaitForState(*running, v1::SCHEDULED);
  auto pending = cluster.client().Submit(Cluster::Spec(5));  // never fits: stays PENDING
  ASSERT_TRUE(pending.ok());

  cluster.KillCoordinator();
  cluster.StartCoordinator();  // same port, same state file
  w1.Signal(SIGCONT);

  auto jobs = cluster.client().ListJobs();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ(cluster.client().Get(*done)->state(), v1::SUCCEEDED);
  EXPECT_EQ(cluster.client().Get(*waiting)->state(), v1::CANCELLED);
  EXPECT_EQ(cluster.client().Get(*pending)->state(), v1::PENDING);
  // The interrupted job runs again as a new attempt once the workers reconnect.
  v1::Job recovered = cluster.WaitForState(*running, v1::SUCCEEDED);
  EXPECT_EQ(recovered.attempt(), 2);
  EXPECT_EQ(recovered.restarts(), 0);
  EXPECT_TRUE(HasEvent(recovered, "coordinator restarted while attempt 1 was"))
      << JobEventLog(recovered);
}

}  // namespace
}  // namespace shardwise::testing
