// The JobController over real managers and a real SQLite file, with time simulated (no
// test here sleeps) and worker sessions that keep what the controller sends them.

#include "server/job_controller.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/metrics.h"
#include "common/testing/scratch.h"
#include "contracts/worker_features.h"
#include "gtest/gtest.h"
#include "server/coordinator_metrics.h"
#include "server/requeue_bound.h"
#include "server/testing/coordinator_core.h"

namespace shardwise {
namespace {

// Rank `rank` of job-1's attempt 1 says it failed.
v1::AttemptReport Failed(int rank, const std::string& message, bool permanent) {
  v1::AttemptReport report;
  report.set_job_id("job-1");
  report.set_attempt(1);
  report.set_rank(rank);
  report.set_phase(v1::ABORTED);
  report.set_message(message);
  report.set_permanent(permanent);
  return report;
}

class JobControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::ScratchPath("controller-") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    unlink(path_.c_str());
    options_.check_paths = false;
    options_.heartbeat_interval = absl::Seconds(1);
    options_.heartbeat_timeout = absl::Seconds(10);
    options_.stall_warning = absl::Seconds(60);
    options_.stall_abort = absl::Seconds(120);
    options_.reattach_grace = absl::Seconds(30);
    StartCoordinator();
  }

  // As a coordinator process would: over the state file as it is, with no worker known.
  void StartCoordinator() {
    core_.Reset();
    outboxes_.clear();
    auto core = testing::OpenCoordinatorCore(
        path_, {.clock = &clock_, .controller = options_, .registry = registry_options_});
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
  }

  // Registers a worker (naming the attempt it runs, if any, and the features of its
  // release: none, as the first release's) and opens its session.
  void AddWorker(const std::string& name, const v1::RunningAttempt* running = nullptr,
                 const std::vector<std::string>& features = {}) {
    Register(name, running, features);
    OpenSession(name);
  }

  // The two halves of a daemon's start: RegisterWorker, then its Session stream.
  void Register(const std::string& name, const v1::RunningAttempt* running = nullptr,
                const std::vector<std::string>& features = {}) {
    v1::RegisterWorkerRequest request;
    request.set_name(name);
    for (const std::string& feature : features) request.add_features(feature);
    request.set_device(v1::CPU);
    request.set_memory_bytes(int64_t{16} << 30);
    if (auto probe = probe_addresses_.find(name); probe != probe_addresses_.end()) {
      request.set_data_probe_address(probe->second);
    }
    if (auto version = data_plane_versions_.find(name); version != data_plane_versions_.end()) {
      request.set_data_plane_version(version->second);
    }
    if (running != nullptr) *request.mutable_running() = *running;
    ASSERT_TRUE(core_.controller->RegisterWorker(request).ok());
  }
  void OpenSession(const std::string& name) {
    outboxes_[name] = std::make_shared<QueuedOutbox>();
    ASSERT_TRUE(core_.controller->OpenSession(name, outboxes_[name]).ok());
  }

  // Everything sent to `worker` since the last call.
  std::vector<v1::CoordinatorMessage> Received(const std::string& worker) {
    std::vector<v1::CoordinatorMessage> messages;
    while (auto message = outboxes_.at(worker)->Pop()) messages.push_back(std::move(*message));
    return messages;
  }

  static v1::JobSpec Spec(int world_size) {
    v1::JobSpec spec;
    for (int w : {4, 8, 3}) spec.mutable_model()->add_layer_widths(w);
    spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
    spec.mutable_data()->mutable_synthetic()->set_seed(1);
    spec.set_global_batch_size(8);
    spec.set_steps(100);
    spec.set_world_size(world_size);
    return spec;
  }

  void Report(const std::string& worker, int rank, v1::AttemptPhase phase, int attempt = 1) {
    v1::AttemptReport report;
    report.set_job_id("job-1");
    report.set_attempt(attempt);
    report.set_rank(rank);
    report.set_phase(phase);
    report.set_led(phase == v1::COMPLETED && rank == 0);  // rank 0 leads unless a test says
    core_.controller->OnReport(worker, report);
  }

  // A heartbeat, counting the messages the worker read on its session where `read` says.
  void Heartbeat(const std::string& worker, const std::string& job_id = "", int attempt = 0,
                 std::optional<int64_t> read = std::nullopt) {
    v1::Heartbeat heartbeat;
    heartbeat.set_job_id(job_id);
    heartbeat.set_attempt(attempt);
    if (read.has_value()) heartbeat.set_messages_read(*read);
    const auto session = outboxes_.find(worker);
    core_.controller->OnHeartbeat(worker, heartbeat,
                                  session == outboxes_.end() ? nullptr : session->second.get());
  }

  // job-1 on w0 and w1, RUNNING.
  void StartTwoRankJob(const v1::JobSpec& spec = Spec(2)) {
    AddWorker("w0");
    AddWorker("w1");
    ASSERT_TRUE(core_.controller->Submit(spec).ok());
    ASSERT_EQ(core_.jobs->Get("job-1")->state(), v1::SCHEDULED);
    Report("w0", 0, v1::JOINED);
    Report("w1", 1, v1::JOINED);
    ASSERT_EQ(core_.jobs->Get("job-1")->state(), v1::RUNNING);
  }

  v1::JobState State() { return core_.jobs->Get("job-1")->state(); }
  // Both ranks of StartTwoRankJob's attempt 1 fail with a connection error, and the job
  // is scheduled again as attempt 2 (its restart policy allowing one).
  void FailBothRanksAndScheduleAgain() {
    core_.controller->OnReport("w0", Failed(0, "a collective failed: connection reset", false));
    core_.controller->OnReport("w1", Failed(1, "a collective failed: connection reset", false));
    clock_.Advance(options_.failure_report_grace + absl::Milliseconds(1));
    core_.controller->CheckHeartbeats();
    core_.controller->Schedule();
    ASSERT_EQ(core_.jobs->Get("job-1")->attempt(), 2);
  }
  // job-1 at step 10 of 100, a step a second, asked to switch to BF16_COMPRESS.
  absl::StatusOr<v1::HookSwitch> ProposeBf16AtStep10() {
    v1::Progress progress;
    progress.set_step(10);
    progress.set_total_steps(100);
    progress.set_steps_per_second(1);
    const absl::Status updated = core_.jobs->UpdateProgress("job-1", 1, progress);
    if (!updated.ok()) return updated;
    v1::CommHook hook;
    hook.set_hook(v1::CommHook::BF16_COMPRESS);
    return core_.controller->SetCommHook("job-1", hook);
  }

  // job-1 on w0 and w1, then a coordinator restart; w1 comes back with rank 1, which then
  // completes, and w0 is not back yet.
  void RestartWhileRankOneReattachesAndCompletes() {
    StartTwoRankJob();
    StartCoordinator();
    v1::RunningAttempt rank_one = RankZeroOfFirstAttempt();
    rank_one.set_rank(1);
    AddWorker("w1", &rank_one);
    Report("w1", 1, v1::COMPLETED);
  }

  // What w0 says it runs when it registers again: job-1's rank 0 of attempt 1.
  static v1::RunningAttempt RankZeroOfFirstAttempt() {
    v1::RunningAttempt running;
    running.set_job_id("job-1");
    running.set_attempt(1);
    running.set_rank(0);
    return running;
  }

  // job-1 re-scheduled as attempt 2 on w0 (rank 0) and w2 (rank 1).
  // job-1 scheduled on w0 and w1 with w2 idle beside; rank 0 joins, w1 answers rank 1
  // with `refusal` (ABORTED), and rank 0, told to abort, ends.
  void RefuseRankOneOfAScheduledAttempt(v1::AttemptReport refusal) {
    AddWorker("w0");
    AddWorker("w1");
    ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
    ASSERT_EQ(State(), v1::SCHEDULED);
    AddWorker("w2");
    Report("w0", 0, v1::JOINED);
    refusal.set_job_id("job-1");
    refusal.set_attempt(1);
    refusal.set_rank(1);
    refusal.set_phase(v1::ABORTED);
    core_.controller->OnReport("w1", refusal);
    Report("w0", 0, v1::ABORTED);
  }

  static bool HasEvent(const v1::Job& job, const std::string& text) {
    for (const v1::JobEvent& event : job.events()) {
      if (absl::StrContains(event.message(), text)) return true;
    }
    return false;
  }

  // Rank `rank` of job-1's attempt 1 reaches the rendezvous: it sets a key with the token
  // its worker was assigned (read from the worker's messages, which are used up).
  void ReachRendezvous(int rank);

  void ExpectSecondAttemptOnW0AndW2() {
    EXPECT_EQ(State(), v1::SCHEDULED);
    const v1::Job job = *core_.jobs->Get("job-1");
    EXPECT_EQ(job.attempt(), 2);
    ASSERT_EQ(job.ranks_size(), 2);
    EXPECT_EQ(job.ranks(0).worker_id(), "w0");
    EXPECT_EQ(job.ranks(1).worker_id(), "w2");
  }

  SimulatedClock clock_;
  // The data-plane probe listener each worker registers with (none if absent).
  std::map<std::string, std::string> probe_addresses_;
  // The data-plane version each worker's release names (0, the first's, if absent).
  std::map<std::string, int32_t> data_plane_versions_;
  std::string path_;
  JobController::Options options_;
  WorkerRegistry::Options registry_options_;
  testing::CoordinatorCore core_;
  std::map<std::string, std::shared_ptr<QueuedOutbox>> outboxes_;
};

TEST_F(JobControllerTest, AJobRunsOnItsWorkersAndSucceedsWhenEveryRankCompletes) {
  StartTwoRankJob();
  std::vector<v1::CoordinatorMessage> sent = Received("w1");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].assignment().job_id(), "job-1");
  EXPECT_EQ(sent[0].assignment().job_uid(), core_.jobs->Get("job-1")->uid());  // its files name it
  EXPECT_FALSE(sent[0].assignment().job_uid().empty());
  EXPECT_EQ(sent[0].assignment().rank(), 1);
  EXPECT_EQ(sent[0].assignment().world_size(), 2);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::BUSY);

  // Only the worker that holds a rank speaks for it.
  Report("w0", 1, v1::COMPLETED);
  Report("w0", 0, v1::COMPLETED);
  EXPECT_EQ(State(), v1::RUNNING);
  Report("w1", 1, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::IDLE);
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::IDLE);
}

// A rank that completed speaks no more: its worker, idle at once, may run another job by
// the time a late or repeated report of the rank arrives (a re-attached worker resends its
// final one). An ABORTED then released the worker from the other job (which it still
// ran, so it could be placed twice) and failed the first; a COMPLETED counted again.
TEST_F(JobControllerTest, AReportOfARankThatCompletedTouchesNeitherItsWorkerNorTheJob) {
  StartTwoRankJob();
  Report("w1", 1, v1::COMPLETED);
  ASSERT_EQ(core_.workers->Get("w1")->state(), v1::IDLE);
  ASSERT_TRUE(core_.controller->Submit(Spec(1)).ok());  // job-2, on the idle w1
  ASSERT_EQ(core_.workers->Get("w1")->job_id(), "job-2");

  Report("w1", 1, v1::ABORTED);
  Report("w1", 1, v1::COMPLETED);
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::BUSY);
  EXPECT_EQ(core_.workers->Get("w1")->job_id(), "job-2");
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->completion().ranks_size(), 1);
  Report("w0", 0, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
}

// A worker of a release before AttemptReport.led says nothing of leading: in the attempt's
// first membership its rank 0 leads anyway, and the job succeeds with its result.
TEST_F(JobControllerTest, RankZeroLeadsTheFirstMembershipWhateverItSays) {
  StartTwoRankJob();
  for (int rank : {1, 0}) {
    v1::AttemptReport done;
    done.set_job_id("job-1");
    done.set_attempt(1);
    done.set_rank(rank);
    done.set_phase(v1::COMPLETED);
    done.set_message(absl::StrCat("rank ", rank, " trained 5 steps"));
    core_.controller->OnReport(absl::StrCat("w", rank), done);
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  EXPECT_EQ(job.result(), "rank 0 trained 5 steps");
}

// A change the state file refuses stands for the controller: a job scheduled while
// another writer holds the file's lock runs once its ranks join (their reports are not
// dropped as a late attempt's), clients meanwhile see what was written, and the change
// is written once the file takes it. (SQLite waits its busy timeout, 5 s, per write.)
TEST_F(JobControllerTest, AChangeTheStateFileRefusedStandsForTheController) {
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE;", nullptr, nullptr, nullptr), SQLITE_OK);
  AddWorker("w0");
  AddWorker("w1");
  EXPECT_EQ(core_.jobs->Current("job-1")->state(), v1::SCHEDULED);
  EXPECT_EQ(State(), v1::PENDING) << "clients see only what was written";
  Report("w0", 0, v1::JOINED);
  Report("w1", 1, v1::JOINED);
  EXPECT_EQ(core_.jobs->Current("job-1")->state(), v1::RUNNING);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_EQ(core_.jobs->RetryUnsavedChanges(), 0);
  EXPECT_EQ(State(), v1::RUNNING);
}

// A daemon whose session reader is stuck heartbeats on, but could not be told to abort:
// once a message has waited on it for the unread timeout it is lost, as a silent one.
TEST_F(JobControllerTest, AWorkerThatReadsNothingIsLostThoughItHeartbeats) {
  AddWorker("w0");
  Register("w1");
  outboxes_["w1"] = std::make_shared<QueuedOutbox>(/*buffered=*/0);  // every message waits
  ASSERT_TRUE(core_.controller->OpenSession("w1", outboxes_["w1"]).ok());
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  Report("w0", 0, v1::JOINED);
  Report("w1", 1, v1::JOINED);
  ASSERT_EQ(State(), v1::RUNNING);
  ASSERT_EQ(options_.unread_timeout, absl::Seconds(30));
  for (int second = 0; second <= 30; ++second) {
    Heartbeat("w0", "job-1", 1);
    Heartbeat("w1", "job-1", 1);
    Received("w0");  // w0 reads what it is sent
    core_.controller->CheckHeartbeats();
    ASSERT_EQ(State(), v1::RUNNING) << "after " << second << " s";
    clock_.Advance(absl::Seconds(1));
  }
  Heartbeat("w0", "job-1", 1);
  Heartbeat("w1", "job-1", 1);
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.reason(),
            "attempt 1 failed: rank 1 (worker w1) was lost: it read none of the coordinator's "
            "messages for more than 30s (its daemon's session reader is stuck)");
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::LOST);
  EXPECT_TRUE(outboxes_["w1"]->closed());
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::DRAINING);  // told to stop, and it reads
}

// A daemon whose heartbeats count its reads is lost once a message written to it stays
// uncounted for the unread timeout, though its connection took every message: a stuck
// reader sent a few small messages fills no window. One that reads on is not.
TEST_F(JobControllerTest, AWorkerWhoseHeartbeatsLeaveAMessageUncountedIsLost) {
  StartTwoRankJob();
  int64_t read_by_w0 = 0;
  auto heartbeats = [&] {
    read_by_w0 += static_cast<int64_t>(Received("w0").size());
    Received("w1");  // its connection takes them; its reader never counts them
    Heartbeat("w0", "job-1", 1, read_by_w0);
    Heartbeat("w1", "job-1", 1, 0);
    core_.controller->CheckHeartbeats();
  };
  for (int second = 0; second <= 30; ++second) {
    heartbeats();
    ASSERT_EQ(State(), v1::RUNNING) << "after " << second << " s";
    clock_.Advance(absl::Seconds(1));
  }
  heartbeats();
  EXPECT_EQ(State(), v1::FAILED);
  EXPECT_EQ(core_.jobs->Get("job-1")->reason(),
            "attempt 1 failed: rank 1 (worker w1) was lost: it read none of the coordinator's "
            "messages for more than 30s (its daemon's session reader is stuck)");
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::DRAINING);
}

// A heartbeat without the count (a release before it) never loses a worker that way.
TEST_F(JobControllerTest, AHeartbeatWithoutAReadCountLosesNothing) {
  StartTwoRankJob();
  for (int second = 0; second <= 60; ++second) {
    Received("w0");
    Received("w1");
    Heartbeat("w0", "job-1", 1);
    Heartbeat("w1", "job-1", 1);
    core_.controller->CheckHeartbeats();
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(State(), v1::RUNNING);
}

TEST_F(JobControllerTest, ASilentWorkerIsLostOnceTheHeartbeatTimeoutPasses) {
  StartTwoRankJob();
  Received("w0");
  clock_.Advance(absl::Seconds(9));
  Heartbeat("w0", "job-1", 1);
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::RUNNING);  // w1 has been silent 9 s: not yet
  clock_.Advance(absl::Seconds(2));
  Heartbeat("w0", "job-1", 1);
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.reason(),
            "attempt 1 failed: rank 1 (worker w1) was lost: no heartbeat for more than 10s");
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::LOST);
  // The surviving rank is told to stop, and is idle again once it says so.
  std::vector<v1::CoordinatorMessage> sent = Received("w0");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].abort().job_id(), "job-1");
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::DRAINING);
  Heartbeat("w0");
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::IDLE);
}

TEST_F(JobControllerTest, AHeartbeatNamingAnAttemptThatEndedIsToldToAbort) {
  AddWorker("w0");
  Heartbeat("w0", "job-7", 3);
  std::vector<v1::CoordinatorMessage> sent = Received("w0");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].abort().job_id(), "job-7");
  EXPECT_EQ(sent[0].abort().attempt(), 3);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::IDLE);
}

TEST_F(JobControllerTest, AStallPastTheAbortTimeFailsTheAttemptNamingTheRank) {
  StartTwoRankJob();
  auto position = [](bool waiting, int64_t waited_ms) {
    v1::Heartbeat heartbeat;
    heartbeat.set_job_id("job-1");
    heartbeat.set_attempt(1);
    v1::RankPosition* p = heartbeat.mutable_position();
    p->set_step(2);
    p->set_phase("backward");
    p->set_unit(1);
    p->set_lane(2);
    p->add_lane_collectives(4);
    p->add_lane_collectives(4);
    p->add_lane_collectives(waiting ? 9 : 8);
    if (waiting) {
      p->set_collective("reduce-scatter");
      p->set_collective_ms(waited_ms);
    }
    return heartbeat;
  };
  for (int64_t second = 0; second <= 121; ++second) {
    core_.controller->OnHeartbeat("w0", position(true, second * 1000));
    core_.controller->OnHeartbeat("w1", position(false, 0));
    core_.controller->CheckHeartbeats();
    if (second == 119) {
      EXPECT_EQ(State(), v1::RUNNING) << "aborted before the stall timeout";
    }
    if (second == 61) {
      const v1::Job job = *core_.jobs->Get("job-1");
      EXPECT_EQ(job.state(), v1::RUNNING);
      EXPECT_NE(job.events().rbegin()->message().find(
                    "stall: rank 1 has not entered reduce-scatter of unit 1 at step 2"),
                std::string::npos)
          << job.events().rbegin()->message();
    }
    clock_.Advance(absl::Seconds(1));
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_NE(job.reason().find("longer than the stall timeout of 2m"), std::string::npos)
      << job.reason();
  EXPECT_NE(job.reason().find("rank 1 has not entered reduce-scatter of unit 1 at step 2"),
            std::string::npos)
      << job.reason();
}

TEST_F(JobControllerTest, AfterARestartARankMissingPastTheGraceRequeuesTheJob) {
  StartTwoRankJob();
  StartCoordinator();  // as after a crash: job-1 is RUNNING in the state file
  EXPECT_EQ(State(), v1::RUNNING);
  const v1::RunningAttempt running = RankZeroOfFirstAttempt();
  AddWorker("w0", &running);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::BUSY);
  EXPECT_EQ(core_.controller->SetCommHook("job-1", v1::CommHook()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  for (int second = 1; second <= 31; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    core_.controller->CheckHeartbeats();
    if (second == 29) {
      EXPECT_EQ(State(), v1::RUNNING);
    }
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);  // not the job's fault
  EXPECT_NE(job.events().rbegin()->message().find(
                "only 1 of 2 ranks re-attached within 30s after the coordinator restarted "
                "(missing: rank 1 (worker w1))"),
            std::string::npos)
      << job.events().rbegin()->message();
  // Re-queued, it waits for two idle workers: w0 drains first.
  EXPECT_EQ(job.state(), v1::PENDING);
  const std::vector<v1::CoordinatorMessage> sent = Received("w0");
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent.back().abort().job_id(), "job-1");
}

// A worker stopping (SIGTERM) before its rank trained refuses the assignment saying it
// leaves: the job is placed again with no restart counted (with max_restarts 0 the
// failure would end it), and not on that worker, which is not counted idle.
TEST_F(JobControllerTest, AWorkerLeavingBeforeTheAttemptRanRequeuesItWithoutARestart) {
  v1::AttemptReport refusal;
  refusal.set_message("the worker is shutting down (it was told to stop: SIGTERM or SIGINT)");
  refusal.set_worker_leaving(true);
  RefuseRankOneOfAScheduledAttempt(refusal);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "rank 1 (worker w1) left before the attempt ran: the worker is "
                       "shutting down"))
      << job.DebugString();
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_NE(core_.workers->Get("w1")->state(), v1::IDLE);  // until its daemon goes
  Heartbeat("w0");                                         // drained: idle again
  ExpectSecondAttemptOnW0AndW2();
}

// A worker that still runs another attempt (one told to abort, stuck in a collective)
// refuses its assignment saying so: the job is placed again with no restart counted, and
// the worker is DRAINING, not idle, until a heartbeat says it runs nothing (counted idle
// at once, it was given job after job to refuse).
TEST_F(JobControllerTest, AWorkerStillRunningAnotherAttemptDrainsBeforeItIsScheduledAgain) {
  v1::AttemptReport refusal;
  refusal.set_message("worker is still running job-0 attempt 3");
  refusal.set_worker_busy(true);
  RefuseRankOneOfAScheduledAttempt(refusal);
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::DRAINING);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "rank 1 (worker w1) refused the assignment: worker is still running "
                       "job-0 attempt 3"))
      << job.DebugString();
  Heartbeat("w1", "job-0", 3);  // the other attempt, still ending: told to abort
  const std::vector<v1::CoordinatorMessage> sent = Received("w1");
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(sent.back().abort().job_id(), "job-0");
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::DRAINING);
  Heartbeat("w0");  // drained: idle again
  ExpectSecondAttemptOnW0AndW2();
  Heartbeat("w1");  // its other attempt ended
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::IDLE);
}

// A worker that could not run its rank (no thread left: a pids limit) is at fault, not
// the job: the job is placed again with no restart counted (with max_restarts 0 it would
// have failed), elsewhere, and the worker is quarantined (else it would be given the job
// again at once).
TEST_F(JobControllerTest, AWorkerThatCouldNotRunItsRankIsQuarantinedAndTheJobPlacedElsewhere) {
  v1::AttemptReport refusal;
  refusal.set_message(
      "this worker could not start a thread (thread: Resource temporarily "
      "unavailable)");
  refusal.set_worker_fault(true);
  RefuseRankOneOfAScheduledAttempt(refusal);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "rank 1 (worker w1) could not run on its worker: this worker could not "
                       "start a thread"))
      << job.DebugString();
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(),
            absl::ToUnixMillis(clock_.Now() + absl::Minutes(10)));
  Heartbeat("w0");  // drained: idle again
  ExpectSecondAttemptOnW0AndW2();
}

// Without quarantines (--quarantine_ms=0) nothing would keep the job off the worker that
// could not run it: the refusal fails the attempt as any rank's failure, bounded by the
// restart policy, rather than re-queue the job onto it without end.
TEST_F(JobControllerTest, WithoutQuarantinesAWorkersFaultCostsTheAttempt) {
  options_.quarantine = absl::ZeroDuration();
  StartCoordinator();
  v1::AttemptReport refusal;
  refusal.set_message("this worker could not start a thread");
  refusal.set_worker_fault(true);
  RefuseRankOneOfAScheduledAttempt(refusal);
  // A retryable failure decides once the grace for a permanent one has passed.
  clock_.Advance(options_.failure_report_grace + absl::Milliseconds(1));
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED) << job.DebugString();  // max_restarts 0
  EXPECT_TRUE(HasEvent(job,
                       "attempt 1 failed: rank 1 (worker w1) failed: this worker could "
                       "not start a thread"))
      << job.DebugString();
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);
}

// A worker that refuses its assignment as still busy though its heartbeats say it runs
// nothing (a buggy release) would be given the job again and again, a new attempt each
// time: the third refusal in a row quarantines it. Taking an assignment clears its count.
TEST_F(JobControllerTest, AWorkerThatKeepsRefusingAsBusyWhileIdleIsQuarantined) {
  AddWorker("w1");
  int attempt = 0;
  // w1 answers job-1's newest attempt with a busy refusal, then says it runs nothing.
  const auto refuse = [&](const std::string& job_id) {
    ASSERT_EQ(core_.jobs->Get(job_id)->state(), v1::SCHEDULED);
    v1::AttemptReport refusal;
    refusal.set_job_id(job_id);
    refusal.set_attempt(core_.jobs->Get(job_id)->attempt());
    refusal.set_rank(0);
    refusal.set_phase(v1::ABORTED);
    refusal.set_message("worker is still running job-0 attempt 3");
    refusal.set_worker_busy(true);
    core_.controller->OnReport("w1", refusal);
    Heartbeat("w1");
    attempt = refusal.attempt();
  };
  ASSERT_TRUE(core_.controller->Submit(Spec(1)).ok());
  refuse("job-1");
  refuse("job-1");
  ASSERT_EQ(attempt, 2);
  Report("w1", 0, v1::JOINED, 3);  // the third assignment taken
  Report("w1", 0, v1::COMPLETED, 3);
  ASSERT_EQ(State(), v1::SUCCEEDED);
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);

  ASSERT_TRUE(core_.controller->Submit(Spec(1)).ok());  // job-2
  refuse("job-2");
  refuse("job-2");
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);  // the count began again
  refuse("job-2");
  const v1::Job job = *core_.jobs->Get("job-2");
  EXPECT_EQ(job.state(), v1::PENDING);  // no other worker, none quarantined: it waits
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "rank 0 (worker w1) refused 3 assignments in a row as still running "
                       "another attempt, though its heartbeats between them said it ran none "
                       "(the last: worker is still running job-0 attempt 3); quarantined for "
                       "10m"))
      << job.DebugString();
  const v1::WorkerInfo w1 = *core_.workers->Get("w1");
  EXPECT_EQ(w1.quarantined_until_ms(), absl::ToUnixMillis(clock_.Now() + absl::Minutes(10)));
  EXPECT_TRUE(absl::StrContains(w1.quarantine_reason(), "refused 3 assignments"))
      << w1.quarantine_reason();
  AddWorker("w2");  // placed on another worker
  EXPECT_EQ(core_.jobs->Get("job-2")->ranks(0).worker_id(), "w2");
}

// A rank that completed before the coordinator restarted is not waited for, though its
// worker registers again without the attempt (it went on to other work): the job goes on
// and succeeds once the others complete, instead of being re-queued. And a restart after
// every rank completed but before the job's end was written finishes it at once.
TEST_F(JobControllerTest, AfterARestartARankThatCompletedIsNotAwaited) {
  StartTwoRankJob();
  v1::AttemptReport done;
  done.set_job_id("job-1");
  done.set_attempt(1);
  done.set_rank(0);
  done.set_phase(v1::COMPLETED);
  done.set_message("trained 5 steps");
  done.set_led(true);
  core_.controller->OnReport("w0", done);         // the leader first, with the job's result
  ASSERT_TRUE(core_.jobs->FlushProgress().ok());  // as the coordinator does every second
  StartCoordinator();
  EXPECT_EQ(State(), v1::RUNNING);
  AddWorker("w0");  // idle: the rank it ran completed
  v1::RunningAttempt running;
  running.set_job_id("job-1");
  running.set_attempt(1);
  running.set_rank(1);
  AddWorker("w1", &running);
  EXPECT_EQ(State(), v1::RUNNING);
  Report("w1", 1, v1::COMPLETED);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::SUCCEEDED);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.result(), "trained 5 steps");

  // Every rank completed; the job's end is lost with the coordinator (its state file
  // holds the completions, not the end).
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ASSERT_EQ(core_.jobs->Get("job-2")->state(), v1::SCHEDULED);
  for (const auto& [worker, rank] : {std::pair<std::string, int>{"w0", 0}, {"w1", 1}}) {
    ASSERT_TRUE(
        core_.jobs->RecordCompletion("job-2", 1, rank, rank == 0, rank == 0 ? "trained" : "").ok());
  }
  ASSERT_TRUE(core_.jobs->MarkRunning("job-2", 1).ok());
  ASSERT_TRUE(core_.jobs->FlushProgress().ok());
  StartCoordinator();
  EXPECT_EQ(core_.jobs->Get("job-2")->state(), v1::SUCCEEDED);
  EXPECT_EQ(core_.jobs->Get("job-2")->result(), "trained");
}

// A worker freed by a completed rank and placed on a waiting job at once: its completion
// is written before the placement, so a crash right after loses neither (the state file
// would otherwise hold job-1 waiting for a rank whose worker runs job-2).
TEST_F(JobControllerTest, ACompletionIsWrittenBeforeItsWorkerIsPlacedAgain) {
  StartTwoRankJob();
  ASSERT_TRUE(core_.controller->Submit(Spec(1)).ok());
  ASSERT_EQ(core_.jobs->Get("job-2")->state(), v1::PENDING);  // both workers are busy
  Report("w0", 0, v1::COMPLETED);
  ASSERT_EQ(core_.jobs->Get("job-2")->state(), v1::SCHEDULED);
  StartCoordinator();  // a crash: no FlushProgress since the report
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.completion().attempt(), 1);
  EXPECT_EQ(std::vector<int>(job.completion().ranks().begin(), job.completion().ranks().end()),
            std::vector<int>{0});
  v1::RunningAttempt second;
  second.set_job_id("job-2");
  second.set_attempt(1);
  AddWorker("w0", &second);
  v1::RunningAttempt first;
  first.set_job_id("job-1");
  first.set_attempt(1);
  first.set_rank(1);
  AddWorker("w1", &first);
  Report("w1", 1, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
}

// Once the coordinator stops, a worker told it is going away that registers again at
// once is turned away (UNAVAILABLE, to be retried at the next coordinator): taken, the
// registration would lose the rank the worker still runs, which a crash never does.
TEST_F(JobControllerTest, AStoppingCoordinatorTurnsRegistrationsAwayAndLosesNoRank) {
  StartTwoRankJob();
  core_.controller->Stop();
  v1::RegisterWorkerRequest request;
  request.set_name("w1");
  request.set_device(v1::CPU);
  request.set_memory_bytes(int64_t{16} << 30);
  request.mutable_running()->set_job_id("job-1");
  request.mutable_running()->set_attempt(1);
  request.mutable_running()->set_rank(1);
  const auto registered = core_.controller->RegisterWorker(request);
  EXPECT_EQ(registered.status().code(), absl::StatusCode::kUnavailable) << registered.status();
  const absl::Status session =
      core_.controller->OpenSession("w1", std::make_shared<QueuedOutbox>());
  EXPECT_EQ(session.code(), absl::StatusCode::kUnavailable) << session;
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::RUNNING) << job.reason();
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(job.attempt(), 1);
}

// A worker that registers again while it runs a rank loses the rank either way; the
// reason says which happened: a reconnect naming the attempt it still runs, or a restart.
TEST_F(JobControllerTest, ARegistrationDuringAnAttemptSaysWhetherTheWorkerRestarted) {
  StartTwoRankJob();
  v1::RunningAttempt running;
  running.set_job_id("job-1");
  running.set_attempt(1);
  running.set_rank(1);
  Register("w1", &running);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_NE(job.reason().find("rank 1 (worker w1) was lost: the worker reconnected"),
            std::string::npos)
      << job.reason();
  EXPECT_EQ(job.reason().find("restarted"), std::string::npos) << job.reason();
}

// A worker that registers without the attempt it ran (a new process) lost the rank by a
// restart, and the reason says so.
TEST_F(JobControllerTest, ARegistrationWithoutTheAttemptIsARestart) {
  StartTwoRankJob();
  Register("w1");
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_NE(
      job.reason().find("rank 1 (worker w1) was lost: the worker restarted and registered again"),
      std::string::npos)
      << job.reason();
  EXPECT_EQ(job.reason().find("reconnected"), std::string::npos) << job.reason();
}

TEST_F(JobControllerTest, AHookSwitchCommitsWhenEveryRankAccepts) {
  StartTwoRankJob();
  Received("w0");
  Received("w1");
  auto proposal = ProposeBf16AtStep10();
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  EXPECT_EQ(proposal->step(), 13);
  for (const std::string worker : {"w0", "w1"}) {
    std::vector<v1::CoordinatorMessage> sent = Received(worker);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].hook_change().step(), 13);
    v1::HookChangeAck ack;
    ack.set_job_id("job-1");
    ack.set_attempt(1);
    ack.set_version(proposal->version());
    ack.set_accepted(true);
    core_.controller->OnHookAck(worker, ack);
  }
  for (const std::string worker : {"w0", "w1"}) {
    const std::vector<v1::CoordinatorMessage> decision = Received(worker);
    ASSERT_EQ(decision.size(), 1u) << worker;
    EXPECT_TRUE(decision[0].hook_decision().commit()) << worker;
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  ASSERT_EQ(job.hook_switches_size(), 1);
  EXPECT_EQ(job.hook_switches(0).state(), v1::HookSwitch::APPLIED);
  EXPECT_EQ(job.hook_switches(0).request_time_ms(), absl::ToUnixMillis(clock_.Now()));
}

// A job cancelled while a switch is being agreed: the cancellation is written before the
// attempt ends, and the switch is abandoned in that write (a later write to an ended job
// is refused), not left PROPOSED in the job's record for good, restarts included.
TEST_F(JobControllerTest, ACancellationAbandonsTheSwitchBeingAgreed) {
  StartTwoRankJob();
  auto proposal = ProposeBf16AtStep10();
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  auto cancelled = core_.controller->Cancel("job-1");
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  for (const v1::Job& job : {*cancelled, *core_.jobs->Get("job-1")}) {
    ASSERT_EQ(job.hook_switches_size(), 1);
    EXPECT_EQ(job.hook_switches(0).state(), v1::HookSwitch::ABANDONED);
    EXPECT_EQ(job.hook_switches(0).reason(),
              "the job ended (CANCELLED) before every rank answered");
  }
  StartCoordinator();
  EXPECT_EQ(core_.jobs->Get("job-1")->hook_switches(0).state(), v1::HookSwitch::ABANDONED);
}

// A rank that had already started the chosen step refuses: the switch is abandoned and,
// in the same write, marked as proposed again (a client polling the job in between must
// not read the abandon as the end), and the next version is proposed after that step.
TEST_F(JobControllerTest, ASwitchRefusedForAStartedStepIsAbandonedAsProposedAgain) {
  StartTwoRankJob();
  auto proposal = ProposeBf16AtStep10();
  ASSERT_TRUE(proposal.ok()) << proposal.status();
  v1::HookChangeAck refusal;
  refusal.set_job_id("job-1");
  refusal.set_attempt(1);
  refusal.set_version(proposal->version());
  refusal.set_accepted(false);
  refusal.set_started_step(14);
  core_.controller->OnHookAck("w1", refusal);
  const v1::Job job = *core_.jobs->Get("job-1");
  ASSERT_EQ(job.hook_switches_size(), 2);
  EXPECT_EQ(job.hook_switches(0).state(), v1::HookSwitch::ABANDONED);
  EXPECT_TRUE(job.hook_switches(0).proposed_again());
  EXPECT_EQ(job.hook_switches(1).state(), v1::HookSwitch::PROPOSED);
  EXPECT_EQ(job.hook_switches(1).version(), proposal->version() + 1);
  EXPECT_GT(job.hook_switches(1).step(), 14);
  bool said = false;
  for (const v1::JobEvent& event : job.events()) {
    said |= absl::StrContains(event.message(), "; proposed again");
  }
  EXPECT_TRUE(said) << job.DebugString();
}

// A worker that re-attached after a coordinator restart but had not opened its session
// when the attempt was given up (its peer never came back) is still told to abort once
// its session opens: otherwise it runs the dead attempt on, DRAINING, and the re-queued
// job waits for it ("waiting for 2 idle CPU workers") until the attempt dies by itself.
TEST_F(JobControllerTest, AnAbortOwedToAWorkerWithoutASessionIsSentWhenItsSessionOpens) {
  StartTwoRankJob();
  options_.reattach_grace = absl::Seconds(3);
  StartCoordinator();
  const v1::RunningAttempt running = RankZeroOfFirstAttempt();
  Register("w0", &running);  // re-attached; its session not yet open
  AddWorker("w2");           // w1 never comes back
  clock_.Advance(absl::Seconds(3));
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::PENDING);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::DRAINING);

  OpenSession("w0");
  const std::vector<v1::CoordinatorMessage> sent = Received("w0");
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].abort().job_id(), "job-1");
  EXPECT_EQ(sent[0].abort().attempt(), 1);
  EXPECT_NE(sent[0].abort().reason().find("only 1 of 2 ranks re-attached"), std::string::npos)
      << sent[0].abort().reason();
  // The worker ends the attempt and says so: idle, and the job runs on w0 and w2.
  Heartbeat("w0");
  ExpectSecondAttemptOnW0AndW2();
  // Delivered once: a later session of the same worker is not told again.
  OpenSession("w0");
  EXPECT_TRUE(Received("w0").empty());
}

// After a coordinator restart, a rank that re-attached and completed before its peer came
// back is back, not awaited: once the peer re-attaches the attempt waits no more (it
// says so) and is not re-queued when the grace ends while that peer still trains.
TEST_F(JobControllerTest, ARankThatCompletedAfterReattachingCountsAsBack) {
  RestartWhileRankOneReattachesAndCompletes();
  const v1::RunningAttempt rank_zero = RankZeroOfFirstAttempt();
  AddWorker("w0", &rank_zero);
  EXPECT_TRUE(HasEvent(*core_.jobs->Get("job-1"),
                       "all 2 ranks of attempt 1 re-attached after the coordinator restarted"))
      << core_.jobs->Get("job-1")->DebugString();

  for (int second = 1; second <= 31; ++second) {  // past the grace, rank 0 still training
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    core_.controller->CheckHeartbeats();
  }
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
  Report("w0", 0, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
}

// After a coordinator restart, a worker whose re-attaching registration was answered past
// its deadline (the new coordinator slow to answer) registers again, the same, before any
// session: a repeat, not a reconnect that lost the rank. It is re-attached again, its
// session then told what it missed, and the attempt trains on, even once every rank is
// back. Once a session has opened, a registration naming the attempt loses the rank.
TEST_F(JobControllerTest, ARepeatedReattachingRegistrationKeepsTheRank) {
  StartTwoRankJob();
  StartCoordinator();
  const v1::RunningAttempt rank_zero = RankZeroOfFirstAttempt();
  v1::RunningAttempt rank_one = rank_zero;
  rank_one.set_rank(1);
  Register("w0", &rank_zero);
  AddWorker("w1", &rank_one);  // every rank back: the wait for them has ended
  ASSERT_TRUE(HasEvent(*core_.jobs->Get("job-1"), "all 2 ranks of attempt 1 re-attached"));
  v1::RegisterWorkerRequest again;
  again.set_name("w0");
  again.set_device(v1::CPU);
  again.set_memory_bytes(int64_t{16} << 30);
  *again.mutable_running() = rank_zero;
  auto response = core_.controller->RegisterWorker(again);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->reattached());
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
  OpenSession("w0");
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::BUSY);
  EXPECT_EQ(core_.workers->Get("w0")->rank(), 0);

  Register("w0", &rank_zero);  // after a session: a reconnect
  EXPECT_NE(core_.jobs->Get("job-1")->reason().find("the worker reconnected"), std::string::npos)
      << core_.jobs->Get("job-1")->reason();
}

// The same, but rank 0 never comes back: at the grace's end the attempt is re-queued, and
// its reason counts only the ranks still awaited (the completed rank 1 is not among them).
TEST_F(JobControllerTest, TheReattachReasonCountsOnlyTheRanksStillAwaited) {
  RestartWhileRankOneReattachesAndCompletes();
  clock_.Advance(absl::Seconds(30));
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::PENDING);
  EXPECT_TRUE(HasEvent(*core_.jobs->Get("job-1"), "only 0 of 1 ranks re-attached within 30s"))
      << core_.jobs->Get("job-1")->DebugString();
}

// A session that notes the job's state as each abort is queued to it.
class AbortWitness final : public SessionOutbox {
 public:
  explicit AbortWitness(const JobManager* jobs) : jobs_(jobs) {}
  bool Push(v1::CoordinatorMessage message) override {
    if (message.has_abort()) states.push_back(jobs_->Get(message.abort().job_id())->state());
    return true;
  }
  void Close() override {}
  bool closed() const override { return false; }
  Delivery delivery() const override { return {}; }  // read at once
  std::vector<v1::JobState> states;

 private:
  const JobManager* const jobs_;
};

// A failed attempt's outcome is written before its ranks are told to stop: a coordinator
// that died in between would otherwise find, after its restart, a RUNNING job whose ranks
// had stopped, and re-queue it without counting a restart.
TEST_F(JobControllerTest, AFailedAttemptIsWrittenBeforeItsRanksAreStopped) {
  AddWorker("w0");
  Register("w1");
  const auto witness = std::make_shared<AbortWitness>(core_.jobs.get());
  ASSERT_TRUE(core_.controller->OpenSession("w1", witness).ok());
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  Report("w0", 0, v1::JOINED);
  Report("w1", 1, v1::JOINED);
  ASSERT_EQ(State(), v1::RUNNING);
  v1::AttemptReport failed;
  failed.set_job_id("job-1");
  failed.set_attempt(1);
  failed.set_rank(0);
  failed.set_phase(v1::ABORTED);
  failed.set_permanent(true);
  failed.set_message("token id 70000 is past the vocabulary");
  core_.controller->OnReport("w0", failed);
  EXPECT_EQ(witness->states, std::vector<v1::JobState>{v1::FAILED});
}

// A worker that died idle (a node that lost power) looks idle until its heartbeats are
// missed, and may be given a rank meanwhile: lost before its rank joined, the job is
// placed again without a restart (with max_restarts 0 it failed), as a rank that never
// reached the rendezvous is (its worker quarantined: a worker the job's start kills must
// not re-queue it without end). A rank lost after it joined still costs the attempt.
TEST_F(JobControllerTest, AWorkerLostBeforeItsRankJoinedRequeuesWithoutARestart) {
  AddWorker("w0");
  AddWorker("w1");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ASSERT_EQ(State(), v1::SCHEDULED);
  Report("w0", 0, v1::JOINED);
  for (int second = 1; second <= 11; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    core_.controller->CheckHeartbeats();
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.restarts(), 0);
  bool said = false;
  for (const v1::JobEvent& event : job.events()) {
    said |=
        event.message().find("rank 1 (worker w1) was lost before it joined") != std::string::npos;
  }
  EXPECT_TRUE(said) << job.DebugString();
  EXPECT_NE(core_.workers->Get("w1")->quarantine_reason().find("was lost before it joined"),
            std::string::npos);
  // Rank 0's worker is asked to stop the attempt's rank it holds.
  bool aborted = false;
  for (const auto& message : Received("w0")) aborted |= message.has_abort();
  EXPECT_TRUE(aborted);
}

// A job whose start takes its workers down (a rank that runs its host out of memory
// before it joins) is placed again uncounted, its workers quarantined, only
// kMaxRequeuesWithoutRestart times in a row: the next loss counts a restart, and the
// restart policy (none here) ends the job instead of it moving through every worker of
// the cluster. An attempt that ran starts the count again.
TEST_F(JobControllerTest, AJobWhoseStartKeepsLosingItsWorkersUsesItsRestarts) {
  for (int w = 0; w < 6; ++w) AddWorker(absl::StrCat("w", w));
  ASSERT_TRUE(core_.controller->Submit(Spec(1)).ok());
  for (int lost = 0; lost <= kMaxRequeuesWithoutRestart; ++lost) {
    const v1::Job job = *core_.jobs->Get("job-1");
    ASSERT_EQ(job.state(), v1::SCHEDULED) << lost;
    EXPECT_EQ(job.requeues_since_running(), lost);
    const std::string worker = job.ranks(0).worker_id();
    core_.controller->CloseSession(worker, outboxes_.at(worker));
    EXPECT_FALSE(core_.workers->Get(worker)->quarantine_reason().empty()) << worker;
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_NE(job.reason().find("was lost before it joined"), std::string::npos) << job.reason();
  EXPECT_NE(job.reason().find("placed again without a restart 3 times in a row already"),
            std::string::npos)
      << job.reason();
}

TEST_F(JobControllerTest, AnAttemptThatRanStartsTheCountOfUncountedRequeuesAgain) {
  v1::JobSpec spec = Spec(1);
  spec.mutable_restart_policy()->set_max_restarts(1);
  for (int w = 0; w < 3; ++w) AddWorker(absl::StrCat("w", w));
  ASSERT_TRUE(core_.controller->Submit(spec).ok());
  const std::string first = core_.jobs->Get("job-1")->ranks(0).worker_id();
  core_.controller->CloseSession(first, outboxes_.at(first));
  const v1::Job again = *core_.jobs->Get("job-1");
  ASSERT_EQ(again.requeues_since_running(), 1);
  Report(again.ranks(0).worker_id(), 0, v1::JOINED, again.attempt());
  ASSERT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->requeues_since_running(), 0);
}

// A worker told to stop (SIGTERM) may refuse its assignment after its session's last
// write, so that the refusal never arrives: its session's end before its rank joined
// re-queues the job as the refusal would, with no restart and no quarantine (the pod that
// replaces it takes its name).
TEST_F(JobControllerTest, AWorkerThatStopsAsToldBeforeItsRankJoinedIsNotQuarantined) {
  AddWorker("w0");
  AddWorker("w1");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ASSERT_EQ(State(), v1::SCHEDULED);
  Report("w0", 0, v1::JOINED);
  v1::Heartbeat stopping;
  stopping.set_stopping(true);
  core_.controller->OnHeartbeat("w1", stopping, outboxes_.at("w1").get());
  core_.controller->CloseSession("w1", outboxes_.at("w1"));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::PENDING);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEvent(job,
                       "rank 1 (worker w1) left before the attempt ran: it stopped: its "
                       "daemon was told to (SIGTERM)"))
      << job.DebugString();
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);
  EXPECT_TRUE(core_.workers->Get("w1")->quarantine_reason().empty());
}

// A worker declared lost while in fact alive (its heartbeats late) registers again naming
// the attempt that ended with it. It is told to abort it as its session opens and stays
// DRAINING until it says it is idle: scheduled at once, its daemon (still running the old
// attempt) would refuse the new assignment and cost the job its restart.
TEST_F(JobControllerTest, AWorkerBackWithAnEndedAttemptDrainsBeforeItIsScheduled) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(1);
  StartTwoRankJob(spec);
  AddWorker("w2");
  for (int second = 1; second <= 11; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w1", "job-1", 1);
    Heartbeat("w2");
    core_.controller->CheckHeartbeats();
  }
  ASSERT_EQ(core_.workers->Get("w0")->state(), v1::LOST);
  ASSERT_EQ(State(), v1::PENDING);  // attempt 1 failed; w1 drains, only w2 is idle
  const v1::RunningAttempt running = RankZeroOfFirstAttempt();
  AddWorker("w0", &running);
  const std::vector<v1::CoordinatorMessage> sent = Received("w0");
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_TRUE(sent[0].has_abort()) << sent[0].DebugString();
  EXPECT_EQ(sent[0].abort().job_id(), "job-1");
  EXPECT_EQ(sent[0].abort().attempt(), 1);
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::DRAINING);
  EXPECT_EQ(State(), v1::PENDING);
  Heartbeat("w0");  // its attempt ended
  ExpectSecondAttemptOnW0AndW2();
}

TEST_F(JobControllerTest, ARegistryAtItsLimitRefusesNewWorkers) {
  registry_options_.max_workers = 1;
  StartCoordinator();
  AddWorker("w0");
  v1::RegisterWorkerRequest request;
  request.set_name("w1");
  EXPECT_EQ(core_.controller->RegisterWorker(request).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A rank that fails for good takes its peer's collective down; the peer's connection error
// may arrive first. The cause decides: the job fails for it, blaming its rank, and is not
// re-queued into the same failure.
TEST_F(JobControllerTest, APermanentFailureReportedJustAfterAPeersConnectionErrorDecides) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(2);
  StartTwoRankJob(spec);
  core_.controller->OnReport("w0",
                             Failed(0, "a collective failed: connection closed by peer", false));
  EXPECT_EQ(State(), v1::RUNNING);  // held for the grace
  clock_.Advance(absl::Milliseconds(500));
  core_.controller->CheckHeartbeats();
  core_.controller->OnReport("w1", Failed(1, "token 123 (byte offset 246) is 300", true));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(absl::StrContains(job.reason(), "rank 1")) << job.reason();
  EXPECT_TRUE(absl::StrContains(job.reason(), "token 123")) << job.reason();
}

// The step of init.checkpoint_dir's checkpoint that an attempt's progress names (any
// rank's) is kept, once, with an event; the next attempt's ranks are told to start from it.
TEST_F(JobControllerTest, TheInitCheckpointAnAttemptStartedFromIsEveryLaterAttempts) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_init()->set_checkpoint_dir("/data/pretrained");
  StartTwoRankJob(spec);
  Received("w0");
  v1::AttemptReport progress;
  progress.set_job_id("job-1");
  progress.set_attempt(1);
  // Rank 1's, though rank 0 speaks for the job (a replacement speaking loaded none).
  progress.set_rank(1);
  progress.set_phase(v1::PROGRESS);
  progress.mutable_progress()->set_step(1);
  progress.mutable_progress()->set_init_checkpoint_step(-3);  // no checkpoint's: not kept
  core_.controller->OnReport("w1", progress);
  EXPECT_FALSE(core_.jobs->Get("job-1")->has_init_checkpoint_step());
  progress.mutable_progress()->set_init_checkpoint_step(40);
  core_.controller->OnReport("w1", progress);
  // Another said later changes nothing.
  progress.set_rank(0);
  progress.mutable_progress()->set_init_checkpoint_step(60);
  core_.controller->OnReport("w0", progress);
  const v1::Job pinned = *core_.jobs->Get("job-1");
  EXPECT_EQ(pinned.init_checkpoint_step(), 40);
  int events = 0;
  for (const v1::JobEvent& event : pinned.events()) {
    events += absl::StrContains(event.message(), "init.checkpoint_dir's checkpoint of step 40");
  }
  EXPECT_EQ(events, 1);

  ASSERT_NO_FATAL_FAILURE(FailBothRanksAndScheduleAgain());
  bool assigned = false;
  for (const v1::CoordinatorMessage& message : Received("w0")) {
    if (!message.has_assignment()) continue;
    assigned = true;
    EXPECT_EQ(message.assignment().attempt(), 2);
    ASSERT_TRUE(message.assignment().has_init_checkpoint_step());
    EXPECT_EQ(message.assignment().init_checkpoint_step(), 40);
  }
  EXPECT_TRUE(assigned);
}

// The newest checkpoint of its own the job's progress named goes to the next attempt's
// ranks, which fail rather than start over where they find none.
TEST_F(JobControllerTest, TheJobsNewestCheckpointIsToldToTheNextAttempt) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(1);
  spec.mutable_output()->set_checkpoint_dir("/ckpt/job");
  spec.mutable_output()->set_checkpoint_interval_steps(10);
  StartTwoRankJob(spec);
  for (const char* worker : {"w0", "w1"}) {
    for (const v1::CoordinatorMessage& message : Received(worker)) {
      EXPECT_FALSE(message.assignment().has_checkpoint_step());  // none reported yet
    }
  }
  v1::AttemptReport progress;
  progress.set_job_id("job-1");
  progress.set_attempt(1);
  progress.set_rank(0);
  progress.set_phase(v1::PROGRESS);
  progress.mutable_progress()->set_step(21);
  progress.mutable_progress()->set_checkpoint_step(10);
  core_.controller->OnReport("w0", progress);
  EXPECT_EQ(core_.jobs->Get("job-1")->checkpoint_step(), 10);
  // Rank 1's, though rank 0 speaks for the job (a replacement speaking knows of none).
  progress.set_rank(1);
  progress.mutable_progress()->set_checkpoint_step(20);
  core_.controller->OnReport("w1", progress);
  EXPECT_EQ(core_.jobs->Get("job-1")->checkpoint_step(), 20);

  ASSERT_NO_FATAL_FAILURE(FailBothRanksAndScheduleAgain());
  int assigned = 0;
  for (const char* worker : {"w0", "w1"}) {
    for (const v1::CoordinatorMessage& message : Received(worker)) {
      if (!message.has_assignment()) continue;
      ++assigned;
      ASSERT_TRUE(message.assignment().has_checkpoint_step());
      EXPECT_EQ(message.assignment().checkpoint_step(), 20);
    }
  }
  EXPECT_EQ(assigned, 2);
}

// A job that starts from no init.checkpoint_dir keeps no step a rank says it started from.
TEST_F(JobControllerTest, AnInitCheckpointStepOfAJobWithoutOneIsNotKept) {
  StartTwoRankJob();
  v1::AttemptReport progress;
  progress.set_job_id("job-1");
  progress.set_attempt(1);
  progress.set_rank(0);
  progress.set_phase(v1::PROGRESS);
  progress.mutable_progress()->set_init_checkpoint_step(40);
  core_.controller->OnReport("w0", progress);
  EXPECT_FALSE(core_.jobs->Get("job-1")->has_init_checkpoint_step());
}

// Alone, a retryable failure re-queues the job once the grace has passed.
TEST_F(JobControllerTest, ARetryableFailureAloneRequeuesTheJobAfterTheGrace) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(2);
  StartTwoRankJob(spec);
  core_.controller->OnReport("w0",
                             Failed(0, "a collective failed: connection closed by peer", false));
  core_.controller->OnReport("w1", Failed(1, "a collective failed: connection reset", false));
  clock_.Advance(options_.failure_report_grace - absl::Milliseconds(1));
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::RUNNING);
  clock_.Advance(absl::Milliseconds(2));
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 1);
  bool requeued_for_rank_0 = false;
  for (const v1::JobEvent& event : job.events()) {
    requeued_for_rank_0 |=
        absl::StrContains(event.message(),
                          "attempt 1 failed: rank 0 (worker w0) failed: a collective failed") &&
        absl::StrContains(event.message(), "re-queued");
  }
  EXPECT_TRUE(requeued_for_rank_0);
}

// A worker stopping (SIGTERM) mid-attempt says it leaves, and its rank's own ABORTED
// follows without saying so: the worker is not counted idle again (it was, and the next
// job placed there was refused) until its daemon registers anew.
TEST_F(JobControllerTest, AStoppingWorkerIsNotCountedIdleAgainUntilItRegistersAnew) {
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(1);
  StartTwoRankJob(spec);
  AddWorker("w2");
  v1::AttemptReport leaving = Failed(1, "aborted: the worker is shutting down", false);
  leaving.set_worker_leaving(true);
  core_.controller->OnReport("w1", leaving);
  core_.controller->OnReport("w1", Failed(1, "aborted: the worker is shutting down", false));
  Heartbeat("w1");
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::DRAINING);
  Report("w0", 0, v1::ABORTED);
  Heartbeat("w0");
  clock_.Advance(options_.failure_report_grace + absl::Milliseconds(1));
  core_.controller->CheckHeartbeats();
  ExpectSecondAttemptOnW0AndW2();
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::DRAINING);
  AddWorker("w1");  // its daemon started again
  EXPECT_EQ(core_.workers->Get("w1")->state(), v1::IDLE);
}

// During a rolling upgrade: a job whose submitter has folders of its own is refused
// while only workers of a release that ignores them are registered, and is placed only
// on an upgraded worker once one is, never on the older one beside it.
TEST_F(JobControllerTest, ASubmittersFoldersGoOnlyToWorkersThatEnforceThem) {
  options_.path_policy = *PathPolicy::Create({"/"}, {"/"}, "/");
  StartCoordinator();
  AddWorker("w0");
  JobController::Submitter alice{"alice", {}};
  alice.paths.input = std::vector<std::string>{"/data/alice"};
  auto refused = core_.controller->Submit(Spec(1), alice);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("does not enforce the folders of alice's"),
            std::string::npos)
      << refused.status();

  AddWorker("w1", nullptr, {kFeatureSubmitterFolders});
  auto job = core_.controller->Submit(Spec(1), alice);
  ASSERT_TRUE(job.ok()) << job.status();
  const v1::Job placed = *core_.jobs->Get(job->id());
  EXPECT_EQ(placed.state(), v1::SCHEDULED);
  ASSERT_EQ(placed.ranks_size(), 1);
  EXPECT_EQ(placed.ranks(0).worker_id(), "w1");
  // Without folders of its own, a submitter's job may run on either.
  ASSERT_TRUE(core_.controller->Submit(Spec(1), {"bob"}).ok());
  EXPECT_EQ(core_.workers->Get("w0")->state(), v1::BUSY);
}

// A client whose call's deadline passed while its job was checked finds no job created
// (it was told the call failed); a retry with the same request id creates it once.
TEST_F(JobControllerTest, ASubmissionTheClientAbandonedCreatesNoJob) {
  const auto abandoned = [] { return true; };
  auto gone = core_.controller->Submit(Spec(1), {"alice"}, "request-1", abandoned);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kCancelled);
  auto listed = core_.jobs->List({}, "", 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_TRUE(listed->jobs.empty());
  auto retried = core_.controller->Submit(Spec(1), {"alice"}, "request-1", [] { return false; });
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->id(), "job-1");
  auto again = core_.controller->Submit(Spec(1), {"alice"}, "request-1", [] { return false; });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id(), "job-1");
  listed = core_.jobs->List({}, "", 10);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->jobs.size(), 1u);
}

// The rendezvous token job-1's assignment gave `worker`, as a rendezvous scope.
v1::RendezvousScope ScopeOf(const std::vector<v1::CoordinatorMessage>& received, int attempt) {
  v1::RendezvousScope scope;
  scope.set_job_id("job-1");
  scope.set_attempt(attempt);
  for (const v1::CoordinatorMessage& message : received) {
    if (message.has_assignment()) scope.set_token(message.assignment().rendezvous_token());
  }
  return scope;
}

void JobControllerTest::ReachRendezvous(int rank) {
  const std::string worker = core_.jobs->Get("job-1")->ranks(rank).worker_id();
  ASSERT_TRUE(
      core_.rendezvous->Set(ScopeOf(Received(worker), 1), absl::StrCat("rank", rank), "addr").ok());
}

// What a rank whose check of the job's paths found an input missing on its worker's host
// says, before it joined.
v1::AttemptReport InputsMissing(int rank) {
  v1::AttemptReport report;
  report.set_job_id("job-1");
  report.set_attempt(1);
  report.set_rank(rank);
  report.set_phase(v1::ABORTED);
  report.set_permanent(true);
  report.set_inputs_missing(true);
  report.set_message(
      "job.data.tokens.train_path: '/data/train.bin': no readable file at this path");
  return report;
}

bool HasEventWith(const v1::Job& job, const std::string& text) {
  for (const v1::JobEvent& event : job.events()) {
    if (event.message().find(text) != std::string::npos) return true;
  }
  return false;
}

// One host without the data volume: its rank reports the input missing, the other rank
// reached the rendezvous (it passed the same check on its host). The host is to blame:
// its worker is quarantined and the job placed again, its restarts untouched.
TEST_F(JobControllerTest, AnInputMissingOnOneHostIsThatHostsFault) {
  AddWorker("w0");
  AddWorker("w1");
  AddWorker("w2");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ASSERT_EQ(core_.jobs->Get("job-1")->ranks(1).worker_id(), "w1");
  core_.controller->OnReport("w1", InputsMissing(1));
  EXPECT_EQ(State(), v1::SCHEDULED) << "rank 0 may lack it too: not known yet";
  ReachRendezvous(0);
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEventWith(
      job,
      "rank 1 (worker w1) could not find the job's inputs on its host, where rank 0 found "
      "theirs (a volume not mounted there?): job.data.tokens.train_path: '/data/train.bin': no "
      "readable file at this path; quarantined for 10m"))
      << job.DebugString();
  EXPECT_NE(core_.workers->Get("w1")->quarantine_reason().find(
                "could not find the job's inputs on its host"),
            std::string::npos);
  Heartbeat("w0");
  ExpectSecondAttemptOnW0AndW2();
}

// Missing on every rank's host: the spec names inputs that are not there, and the job
// fails for good, as before the hosts were told apart.
TEST_F(JobControllerTest, AnInputMissingOnEveryHostIsTheJobsFault) {
  AddWorker("w0");
  AddWorker("w1");
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(3);
  ASSERT_TRUE(core_.controller->Submit(spec).ok());
  core_.controller->OnReport("w0", InputsMissing(0));
  EXPECT_EQ(State(), v1::SCHEDULED);
  core_.controller->OnReport("w1", InputsMissing(1));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_EQ(job.reason(),
            "attempt 1 failed: rank 0 (worker w0) failed: job.data.tokens.train_path: "
            "'/data/train.bin': no readable file at this path (2 of the attempt's 2 ranks found "
            "the job's inputs missing on their hosts); not re-queued: every attempt would fail "
            "the same way");
  EXPECT_EQ(core_.workers->Get("w0")->quarantined_until_ms(), 0);
}

// The job's own checkpoints missing on every host (a volume missing across the cluster,
// or the checkpoints removed: worker/daemon/resume_check.h says so without `permanent`):
// the attempt fails, re-queued under the restart policy, and no host is blamed.
TEST_F(JobControllerTest, TheJobsCheckpointsMissingOnEveryHostAreRetriedUnderTheRestartPolicy) {
  AddWorker("w0");
  AddWorker("w1");
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(3);
  ASSERT_TRUE(core_.controller->Submit(spec).ok());
  for (int rank : {0, 1}) {
    v1::AttemptReport missing = InputsMissing(rank);
    missing.set_permanent(false);
    missing.set_message(
        "job.output.checkpoint_dir: '/ckpt': none of the job's checkpoints on this host, but "
        "the job wrote its checkpoint of step 40 there");
    core_.controller->OnReport(rank == 0 ? "w0" : "w1", missing);
  }
  core_.controller->Schedule();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::SCHEDULED) << job.reason();
  EXPECT_EQ(job.attempt(), 2);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_TRUE(HasEventWith(job, "none of the job's checkpoints on this host")) << job.DebugString();
  EXPECT_EQ(core_.workers->Get("w0")->quarantined_until_ms(), 0);
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);
}

// No other rank was seen with the inputs by the join deadline (it never came, or came
// late): the job's, as without the check, not a rendezvous nobody reached.
TEST_F(JobControllerTest, AnInputMissingWithNoRankSeenToHaveItIsTheJobsAtTheJoinDeadline) {
  AddWorker("w0");
  AddWorker("w1");
  v1::JobSpec spec = Spec(2);
  spec.mutable_restart_policy()->set_max_restarts(2);
  ASSERT_TRUE(core_.controller->Submit(spec).ok());
  core_.controller->OnReport("w1", InputsMissing(1));
  for (int second = 0; second < 29; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    Heartbeat("w1");
    core_.controller->CheckHeartbeats();
    ASSERT_EQ(State(), v1::SCHEDULED) << "after " << second + 1 << " s";
  }
  clock_.Advance(absl::Seconds(1));
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(job.reason(), "rank 1 (worker w1) failed: job.data.tokens"))
      << job.reason();
  EXPECT_TRUE(absl::StrContains(job.reason(), "not re-queued")) << job.reason();
}

// Two hosts of four lack the inputs: decided once the last rank is known (here by its
// report, with no periodic pass), both blamed at once.
TEST_F(JobControllerTest, EveryHostLackingTheInputsIsBlamedAtOnce) {
  for (const char* worker : {"w0", "w1", "w2", "w3", "w4", "w5"}) AddWorker(worker);
  ASSERT_TRUE(core_.controller->Submit(Spec(4)).ok());
  const v1::Job scheduled = *core_.jobs->Get("job-1");
  ReachRendezvous(0);
  ReachRendezvous(1);
  core_.controller->OnReport(scheduled.ranks(2).worker_id(), InputsMissing(2));
  EXPECT_EQ(State(), v1::SCHEDULED) << "rank 3 is not known yet";
  core_.controller->OnReport(scheduled.ranks(3).worker_id(), InputsMissing(3));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(HasEventWith(
      job, absl::StrCat("ranks 2 (worker ", scheduled.ranks(2).worker_id(), ") and 3 (worker ",
                        scheduled.ranks(3).worker_id(),
                        ") could not find the job's inputs on their hosts, where ranks 0, 1 "
                        "found theirs (a volume not mounted there?)")))
      << job.DebugString();
  for (int rank : {2, 3}) {
    EXPECT_GT(core_.workers->Get(scheduled.ranks(rank).worker_id())->quarantined_until_ms(), 0);
  }
}

// A retryable failure held for its grace (a peer that gave up waiting for the missing
// rank) does not decide while the input missing on a rank's host waits for its decision,
// which may keep that host out where a failure of the attempt would not.
TEST_F(JobControllerTest, AHeldFailureWaitsForTheMissingInputsDecision) {
  for (const char* worker : {"w0", "w1", "w2", "w3", "w4"}) AddWorker(worker);
  ASSERT_TRUE(core_.controller->Submit(Spec(4)).ok());
  const v1::Job scheduled = *core_.jobs->Get("job-1");
  core_.controller->OnReport(scheduled.ranks(2).worker_id(), InputsMissing(2));
  const std::string peer = scheduled.ranks(1).worker_id();
  ReachRendezvous(1);
  v1::AttemptReport gave_up;
  gave_up.set_job_id("job-1");
  gave_up.set_attempt(1);
  gave_up.set_rank(1);
  gave_up.set_phase(v1::ABORTED);
  gave_up.set_message("connecting rank 1 of 4: timed out waiting for rank 2");
  core_.controller->OnReport(peer, gave_up);
  clock_.Advance(absl::Seconds(2));  // past the held failure's grace
  core_.controller->CheckHeartbeats();
  ASSERT_EQ(State(), v1::SCHEDULED) << core_.jobs->Get("job-1")->reason();
  ReachRendezvous(0);
  ReachRendezvous(3);
  core_.controller->CheckHeartbeats();
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0) << job.DebugString();
  EXPECT_GT(core_.workers->Get(scheduled.ranks(2).worker_id())->quarantined_until_ms(), 0);
  EXPECT_TRUE(HasEventWith(job, "where ranks 0, 1, 3 found theirs")) << job.DebugString();
}

// Without quarantines no host can be kept out: the job fails for good, as before.
TEST_F(JobControllerTest, WithoutQuarantinesAnInputMissingOnOneHostFailsTheJob) {
  options_.quarantine = absl::ZeroDuration();
  StartCoordinator();
  AddWorker("w0");
  AddWorker("w1");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ReachRendezvous(0);
  core_.controller->OnReport("w1", InputsMissing(1));
  EXPECT_EQ(State(), v1::FAILED);
  EXPECT_EQ(core_.workers->Get("w1")->quarantined_until_ms(), 0);
}

TEST_F(JobControllerTest, ARankThatNeverReachesTheRendezvousIsBlamedAndItsWorkerQuarantined) {
  AddWorker("w0");
  AddWorker("w1");
  AddWorker("w2");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  ASSERT_EQ(core_.jobs->Get("job-1")->ranks(1).worker_id(), "w1");
  // Rank 0 reaches the rendezvous; rank 1's worker took its assignment and went quiet.
  ReachRendezvous(0);
  for (int second = 0; second < 29; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    Heartbeat("w1", "job-1", 1);
    Heartbeat("w2");
    core_.controller->CheckHeartbeats();
  }
  EXPECT_EQ(State(), v1::SCHEDULED);
  clock_.Advance(absl::Seconds(1));
  core_.controller->CheckHeartbeats();

  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);  // the worker's fault, not the job's
  bool blamed = false;
  for (const v1::JobEvent& event : job.events()) {
    blamed |= event.message().find(
                  "rank 1 (worker w1) did not reach the rendezvous within 30 s "
                  "(rendezvous.join_timeout_seconds); quarantined for 10m") != std::string::npos;
  }
  EXPECT_TRUE(blamed) << job.DebugString();
  EXPECT_NE(core_.workers->Get("w1")->quarantine_reason().find("did not reach the rendezvous"),
            std::string::npos);
  const absl::Time quarantine_end = clock_.Now() + absl::Minutes(10);
  // Both come back idle, w1 first: the second attempt still goes to w0 and w2.
  Heartbeat("w1");
  Heartbeat("w0");
  ExpectSecondAttemptOnW0AndW2();
  // A job that needs w1 waits for its quarantine to end, then runs without another event.
  auto second = core_.controller->Submit(Spec(1));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(core_.jobs->Get(second->id())->state(), v1::PENDING);
  const int events_while_pending = core_.jobs->Get(second->id())->events_size();
  for (int tick = 0; tick < 120; ++tick) {
    clock_.Advance(absl::Seconds(5));
    Heartbeat("w0", "job-1", 2);
    Heartbeat("w1");
    Heartbeat("w2", "job-1", 2);
    Report("w0", 0, v1::JOINED, 2);
    Report("w2", 1, v1::JOINED, 2);
    core_.controller->CheckHeartbeats();
    if (clock_.Now() < quarantine_end) {
      const v1::Job waiting = *core_.jobs->Get(second->id());
      ASSERT_EQ(waiting.state(), v1::PENDING)
          << "placed " << quarantine_end - clock_.Now() << " before w1's quarantine ends";
      ASSERT_EQ(waiting.events_size(), events_while_pending) << waiting.DebugString();
    }
  }
  EXPECT_EQ(core_.jobs->Get(second->id())->state(), v1::SCHEDULED);
  EXPECT_EQ(core_.jobs->Get(second->id())->ranks(0).worker_id(), "w1");
}

TEST_F(JobControllerTest, RanksThatReachTheRendezvousButDoNotConnectAreReportedNotFailed) {
  AddWorker("w0");
  AddWorker("w1");
  v1::JobSpec spec = Spec(2);
  spec.mutable_rendezvous()->set_join_timeout_seconds(5);
  ASSERT_TRUE(core_.controller->Submit(spec).ok());
  ReachRendezvous(0);
  ReachRendezvous(1);
  clock_.Advance(absl::Seconds(5));
  core_.controller->CheckHeartbeats();
  core_.controller->CheckHeartbeats();  // once per attempt
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::SCHEDULED);  // the data plane's own timeout decides
  int reported = 0;
  for (const v1::JobEvent& event : job.events()) {
    reported += event.message().find(
                    "every rank reached the rendezvous, but ranks 0 (worker "
                    "w0) and 1 (worker w1) had not connected to its peers "
                    "within 5 s") != std::string::npos;
  }
  EXPECT_EQ(reported, 1) << job.DebugString();
  EXPECT_TRUE(core_.workers->Get("w1")->quarantine_reason().empty());
}

// Every rank reached the rendezvous, none connected: each worker is asked to probe its
// peers' data plane; the one no other reaches (rank 2 on w2, its port dropped) is blamed
// and quarantined, and the job re-queued without a restart counted.
class DataPlaneProbeTest : public JobControllerTest {
 protected:
  // A job of 3 ranks on w0, w1 and w2, each with a probe listener, at its join deadline:
  // returns the probe each worker was sent.
  std::map<std::string, v1::DataPlaneProbe> StartProbe() {
    for (int w = 0; w < 4; ++w) {
      probe_addresses_[absl::StrCat("w", w)] = absl::StrCat("10.0.0.", w, ":700", w);
      AddWorker(absl::StrCat("w", w));
    }
    v1::JobSpec spec = Spec(3);
    spec.set_global_batch_size(6);
    spec.mutable_rendezvous()->set_join_timeout_seconds(5);
    EXPECT_TRUE(core_.controller->Submit(spec).ok());
    for (int r = 0; r < 3; ++r) {
      const std::string worker = absl::StrCat("w", r);
      EXPECT_TRUE(
          core_.rendezvous->Set(ScopeOf(Received(worker), 1), absl::StrCat("rank", r), "addr")
              .ok());
    }
    clock_.Advance(absl::Seconds(5));
    core_.controller->CheckHeartbeats();
    std::map<std::string, v1::DataPlaneProbe> probes;
    for (int r = 0; r < 3; ++r) {
      const std::string worker = absl::StrCat("w", r);
      for (const v1::CoordinatorMessage& message : Received(worker)) {
        if (message.has_probe()) probes[worker] = message.probe();
      }
    }
    return probes;
  }
  // Rank `rank`'s answer: the ranks it reached, and those it did not.
  void Answer(int rank, const std::vector<int>& reached, const std::vector<int>& missed,
              const std::string& worker = "") {
    v1::DataPlaneProbeResult result;
    result.set_job_id("job-1");
    result.set_attempt(1);
    result.set_rank(rank);
    for (int r : reached) {
      auto* outcome = result.add_outcomes();
      outcome->set_rank(r);
      outcome->set_reached(true);
    }
    for (int r : missed) {
      auto* outcome = result.add_outcomes();
      outcome->set_rank(r);
      outcome->set_error("timed out after 2s");
    }
    core_.controller->OnProbeResult(worker.empty() ? absl::StrCat("w", rank) : worker, result);
  }
  std::string Events() {
    const v1::Job job = *core_.jobs->Get("job-1");
    std::string events;
    for (const v1::JobEvent& event : job.events()) absl::StrAppend(&events, event.message(), "\n");
    return events;
  }
};

TEST_F(DataPlaneProbeTest, TheRankNoPeerReachesIsBlamedAndItsWorkerQuarantined) {
  std::map<std::string, v1::DataPlaneProbe> probes = StartProbe();
  ASSERT_EQ(probes.size(), 3u);
  const v1::DataPlaneProbe& of_w0 = probes["w0"];
  EXPECT_EQ(of_w0.rank(), 0);
  ASSERT_EQ(of_w0.targets_size(), 2);
  EXPECT_EQ(of_w0.targets(0).rank(), 1);
  EXPECT_EQ(of_w0.targets(0).address(), "10.0.0.1:7001");
  EXPECT_EQ(of_w0.targets(1).address(), "10.0.0.2:7002");
  EXPECT_NE(Events().find("had not connected to its peers within 5 s "
                          "(rendezvous.join_timeout_seconds); probing the data plane"),
            std::string::npos)
      << Events();
  Answer(0, {1}, {2});
  Answer(2, {0}, {}, "w1");  // not w1's rank: ignored
  Answer(1, {0}, {2});
  EXPECT_EQ(State(), v1::SCHEDULED) << "judged before every rank answered";
  Answer(2, {0, 1}, {});
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_NE(Events().find("rank 2 (worker w2) could not be reached over the data plane by any "
                          "other rank (rank 2 at 10.0.0.2:7002 tried by rank 0 (timed out after "
                          "2s), rank 1 (timed out after 2s)): is a firewall dropping its "
                          "data-plane ports"),
            std::string::npos)
      << Events();
  EXPECT_NE(core_.workers->Get("w2")->quarantine_reason().find(
                "rank 2 of job-1 attempt 1 could not be reached over the data plane"),
            std::string::npos)
      << core_.workers->Get("w2")->quarantine_reason();
  EXPECT_TRUE(core_.workers->Get("w0")->quarantine_reason().empty());
  EXPECT_TRUE(core_.workers->Get("w1")->quarantine_reason().empty());
}

// Probes that find everyone reachable blame no one: the data plane's own timeout decides,
// as without probes.
TEST_F(DataPlaneProbeTest, WithEveryoneReachedNobodyIsBlamed) {
  StartProbe();
  Answer(0, {1, 2}, {});
  Answer(1, {0, 2}, {});
  Answer(2, {0, 1}, {});
  EXPECT_NE(Events().find("the data-plane probes of 3 of 3 ranks found no rank that the others "
                          "cannot reach; the data plane's own timeout decides"),
            std::string::npos)
      << Events();
  EXPECT_EQ(State(), v1::SCHEDULED);
  for (const char* worker : {"w0", "w1", "w2"}) {
    EXPECT_TRUE(core_.workers->Get(worker)->quarantine_reason().empty()) << worker;
  }
}

// Answers that do not all come are judged at the probe deadline with those that did: one
// rank that could not reach another is not enough to blame it.
TEST_F(DataPlaneProbeTest, AProbeIsJudgedAtItsDeadlineWithTheAnswersThatCame) {
  StartProbe();
  Answer(0, {1}, {2});
  clock_.Advance(absl::Seconds(4));
  for (int w = 0; w < 3; ++w) Heartbeat(absl::StrCat("w", w), "job-1", 1);
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(Events().find("the data-plane probes of"), std::string::npos) << "judged early";
  clock_.Advance(absl::Seconds(1));
  for (int w = 0; w < 3; ++w) Heartbeat(absl::StrCat("w", w), "job-1", 1);
  core_.controller->CheckHeartbeats();
  EXPECT_NE(Events().find("the data-plane probes of 1 of 3 ranks found no rank"), std::string::npos)
      << Events();
  EXPECT_EQ(State(), v1::SCHEDULED);
  EXPECT_TRUE(core_.workers->Get("w2")->quarantine_reason().empty());
  Answer(1, {0}, {2});  // late: the probe was judged
  EXPECT_TRUE(core_.workers->Get("w2")->quarantine_reason().empty());
}

// When no rank came, the job or the network is the likelier cause than every worker: the
// attempt fails (under the restart policy) and nobody is quarantined.
TEST_F(JobControllerTest, WhenNoRankReachesTheRendezvousTheAttemptFailsAndNobodyIsQuarantined) {
  AddWorker("w0");
  AddWorker("w1");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());
  for (int second = 0; second < 30; ++second) {
    clock_.Advance(absl::Seconds(1));
    Heartbeat("w0", "job-1", 1);
    Heartbeat("w1", "job-1", 1);
    core_.controller->CheckHeartbeats();
  }
  EXPECT_EQ(State(), v1::FAILED);
  EXPECT_NE(core_.jobs->Get("job-1")->reason().find("no rank reached the rendezvous within 30 s"),
            std::string::npos)
      << core_.jobs->Get("job-1")->reason();
  EXPECT_TRUE(core_.workers->Get("w0")->quarantine_reason().empty());
  EXPECT_TRUE(core_.workers->Get("w1")->quarantine_reason().empty());
}

// ---- fault-tolerant jobs: a HYBRID job of two shard groups, {0, 1} and {2, 3} ----

class FaultTolerantJobTest : public JobControllerTest {
 protected:
  void SetUp() override {
    JobControllerTest::SetUp();
    options_.metrics = &metrics_;
    StartCoordinator();
  }
  void TearDown() override { core_.controller.reset(); }  // before the metrics it records into
  double MembershipChanges(const std::string& cause) {
    return metrics_.membership_changes_total.With({cause}).value();
  }

  // job-1 RUNNING on w0..w3, rank r on worker wr.
  // HYBRID_SHARD in groups of 2 over `world` ranks on workers w0, w1, ..., running; with
  // `max_replicas`, a job that may grow to that many groups.
  void StartHybridJob(int world = 4, int max_replicas = 0, int max_restarts = 0) {
    v1::JobSpec spec = Spec(world);
    spec.mutable_restart_policy()->set_max_restarts(max_restarts);
    spec.set_global_batch_size(24);
    spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
    spec.mutable_fsdp()->set_shard_group_size(2);
    spec.mutable_fault_tolerance()->set_min_replicas(1);
    spec.mutable_fault_tolerance()->set_max_replicas(max_replicas);
    for (int w = 0; w < world; ++w) AddWorker(absl::StrCat("w", w));
    ASSERT_TRUE(core_.controller->Submit(spec).ok());
    for (int r = 0; r < world; ++r) Report(absl::StrCat("w", r), r, v1::JOINED);
    ASSERT_EQ(State(), v1::RUNNING);
    for (int w = 0; w < world; ++w) rank_scopes_[w] = ScopeOf(Received(absl::StrCat("w", w)), 1);
  }
  std::map<int, v1::RendezvousScope> rank_scopes_;  // of StartHybridJob's ranks
  bool GotMembershipChange(const std::string& worker, int epoch = 1) {
    for (const auto& message : Received(worker)) {
      if (message.has_membership_change() && message.membership_change().epoch() == epoch) {
        return true;
      }
    }
    return false;
  }
  bool GotAbort(const std::string& worker) {
    for (const auto& message : Received(worker)) {
      if (message.has_abort()) return true;
    }
    return false;
  }
  static v1::AttemptReport Said(int rank, v1::AttemptPhase phase, const std::string& message) {
    v1::AttemptReport report;
    report.set_job_id("job-1");
    report.set_attempt(1);
    report.set_rank(rank);
    report.set_phase(phase);
    report.set_message(message);
    return report;
  }
  MetricsRegistry registry_;
  CoordinatorMetrics metrics_{&registry_};
  std::vector<int32_t> Live() {
    const v1::Membership m = core_.jobs->Get("job-1")->membership();
    return {m.live_ranks().begin(), m.live_ranks().end()};
  }
  std::string Events() {
    const v1::Job job = *core_.jobs->Get("job-1");
    std::string events;
    for (const v1::JobEvent& event : job.events()) {
      absl::StrAppend(&events, event.message(), "\n");
    }
    return events;
  }
};

// A worker told to stop (a rollout, a scale-down) says so in its last heartbeat: it takes
// no job meanwhile, and its session's end is no failure detected (ShardwiseWorkersLost
// alerts on those); one whose session just ends is.
TEST_F(FaultTolerantJobTest, AWorkerThatStopsAsToldIsNoFailure) {
  AddWorker("w8");
  AddWorker("w9");
  v1::Heartbeat stopping;
  stopping.set_stopping(true);
  core_.controller->OnHeartbeat("w9", stopping, outboxes_.at("w9").get());
  EXPECT_EQ(core_.workers->Get("w9")->state(), v1::DRAINING);
  core_.controller->CloseSession("w9", outboxes_.at("w9"));
  EXPECT_EQ(core_.workers->Get("w9")->state(), v1::LOST);
  EXPECT_EQ(core_.workers->Get("w9")->lost_reason(),
            "it stopped: its daemon was told to (SIGTERM)");
  EXPECT_EQ(metrics_.failure_detections_total.With({"session_closed"}).value(), 0);
  // A stopping heartbeat from a replaced session (a pod gone, its successor registered
  // under the name) says nothing of the current one.
  const auto replaced = std::make_shared<QueuedOutbox>();
  core_.controller->OnHeartbeat("w8", stopping, replaced.get());
  EXPECT_EQ(core_.workers->Get("w8")->state(), v1::IDLE);
  core_.controller->CloseSession("w8", outboxes_.at("w8"));  // w8 dies
  EXPECT_EQ(core_.workers->Get("w8")->state(), v1::LOST);
  EXPECT_EQ(metrics_.failure_detections_total.With({"session_closed"}).value(), 1);
}

// A rank lost: its group leaves at once, its mate told to stop (DRAINING), the other
// group told the new epoch; the attempt goes on.
TEST_F(FaultTolerantJobTest, ALostRankTakesItsGroupOutAndItsMateIsStopped) {
  StartHybridJob();
  v1::AttemptReport lost = Said(3, v1::ABORTED, "a collective failed");
  core_.controller->OnReport("w3", lost);
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(GotMembershipChange("w0"));
  EXPECT_TRUE(GotMembershipChange("w1"));
  EXPECT_TRUE(GotAbort("w2"));
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::DRAINING);
  EXPECT_EQ(MembershipChanges("lost"), 1);
  EXPECT_EQ(MembershipChanges("left"), 0);
  // The group that left lost the rendezvous (rank 3 may be alive behind a partition);
  // the group training on keeps it.
  for (int rank : {2, 3}) {
    EXPECT_EQ(core_.rendezvous->Set(rank_scopes_[rank], "epoch1/rank0", "stale").code(),
              absl::StatusCode::kPermissionDenied)
        << rank;
  }
  ASSERT_TRUE(core_.rendezvous->Set(rank_scopes_[0], "epoch1/rank0", "address").ok());
  EXPECT_EQ(*core_.rendezvous->Get(rank_scopes_[1], "epoch1/rank0"), "address");
}

// A rank leaving (its worker drained): the group's ranks are not stopped, as they finish
// the step and leave by themselves; the other group is told the new epoch; the mate is
// IDLE once it reports its end, the leaving worker is not (it is shutting down).
TEST_F(FaultTolerantJobTest, ALeavingRanksGroupFinishesItsStepAndLeavesByItself) {
  StartHybridJob();
  v1::AttemptReport leaving =
      Said(3, v1::LEAVING, "its worker is shutting down; it leaves with its group after step 7");
  core_.controller->OnReport("w3", leaving);
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(GotMembershipChange("w0"));
  EXPECT_TRUE(GotMembershipChange("w1"));
  EXPECT_FALSE(GotAbort("w2"));
  EXPECT_FALSE(GotAbort("w3"));
  // Still in the rendezvous: it may be connecting the epoch it leaves after.
  EXPECT_TRUE(core_.rendezvous->Set(rank_scopes_[3], "epoch0/rank3", "address").ok());
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::BUSY);
  EXPECT_EQ(MembershipChanges("left"), 1);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_NE(job.events(job.events_size() - 1)
                .message()
                .find("rank 3 (worker w3) is leaving: its worker is shutting down"),
            std::string::npos)
      << job.events(job.events_size() - 1).message();
  // Their ends, once they have left.
  v1::AttemptReport left = leaving;
  left.set_phase(v1::ABORTED);
  left.set_message("rank 3 left the attempt with its group");
  left.set_worker_leaving(true);
  core_.controller->OnReport("w3", left);
  left.set_rank(2);
  left.set_worker_leaving(false);
  core_.controller->OnReport("w2", left);
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::IDLE);
  EXPECT_EQ(core_.workers->Get("w3")->state(), v1::BUSY);  // until its daemon goes
}

// The job completes while a group is leaving it (its worker stopping): the group's ranks
// are aborted and their workers freed, where their last reports, for an ended attempt,
// would free nothing and leave them BUSY for good.
TEST_F(FaultTolerantJobTest, AGroupLeavingWhenTheJobCompletesIsFreed) {
  StartHybridJob();
  core_.controller->OnReport("w3", Said(3, v1::LEAVING, "its worker is shutting down"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  for (int rank : {0, 1}) {
    v1::AttemptReport completed = Said(rank, v1::COMPLETED, "trained");
    completed.set_led(rank == 0);
    core_.controller->OnReport(rank == 0 ? "w0" : "w1", completed);
  }
  ASSERT_EQ(State(), v1::SUCCEEDED);
  EXPECT_TRUE(GotAbort("w2"));
  EXPECT_TRUE(GotAbort("w3"));
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::DRAINING);
  // Its last report comes for an ended attempt; its heartbeat running nothing frees it.
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "rank 2 left the attempt with its group"));
  Heartbeat("w2");
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::IDLE);
}

// Leaving below min_replicas: the attempt fails as it would without fault tolerance.
TEST_F(FaultTolerantJobTest, LeavingBelowMinReplicasFailsTheAttempt) {
  StartHybridJob();
  v1::AttemptReport leaving = Said(0, v1::LEAVING, "its worker is shutting down");
  core_.controller->OnReport("w0", leaving);
  ASSERT_EQ(Live(), (std::vector<int32_t>{2, 3}));
  leaving.set_rank(2);
  core_.controller->OnReport("w2", leaving);
  EXPECT_EQ(State(), v1::FAILED);
}

// What a worker of the hybrid job says when it registers again after a coordinator
// restart: it runs rank `rank` of job-1's attempt 1, and holds its rendezvous token.
v1::RunningAttempt RunningRank(int rank) {
  v1::RunningAttempt running;
  running.set_job_id("job-1");
  running.set_attempt(1);
  running.set_rank(rank);
  running.set_rendezvous_token(absl::StrCat("token-", rank));
  return running;
}

v1::RendezvousScope ScopeOf(int rank) {
  v1::RendezvousScope scope;
  scope.set_job_id("job-1");
  scope.set_attempt(1);
  scope.set_token(absl::StrCat("token-", rank));
  return scope;
}

// Killed between writing a membership and sending it: after the restart, the live ranks
// that re-attach get it, and may connect its epoch through the attempt's rendezvous,
// which re-admits them by the tokens they hold.
TEST_F(FaultTolerantJobTest, AMembershipWrittenButNotSentReachesTheRanksAfterARestart) {
  StartHybridJob();
  core_.controller->OnReport("w3", Said(3, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  StartCoordinator();  // the change's messages died with the coordinator
  // The left group's rank 2 comes back first: it is not counted for a live rank.
  const v1::RunningAttempt left = RunningRank(2);
  AddWorker("w2", &left);
  EXPECT_TRUE(GotAbort("w2"));
  for (int rank : {1, 0}) {
    const v1::RunningAttempt running = RunningRank(rank);
    AddWorker(absl::StrCat("w", rank), &running);
  }
  EXPECT_TRUE(GotMembershipChange("w0"));
  EXPECT_TRUE(GotMembershipChange("w1"));
  ASSERT_TRUE(core_.rendezvous->Set(ScopeOf(0), "epoch1/rank0", "address").ok());
  EXPECT_EQ(*core_.rendezvous->Get(ScopeOf(1), "epoch1/rank0"), "address");
  EXPECT_EQ(core_.rendezvous->Get(ScopeOf(3), "epoch1/rank0").status().code(),
            absl::StatusCode::kPermissionDenied);
  // Every live rank is back: nothing more is awaited past the grace.
  clock_.Advance(absl::Seconds(31));
  for (const char* worker : {"w0", "w1"}) Heartbeat(worker, "job-1", 1);
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
}

// ---- hook switches in a fault-tolerant job: NO_SHARD over 3 ranks (hybrid strategies
// take no hook), a switch to BF16_COMPRESS proposed at step 10 ----

class FaultTolerantHookTest : public FaultTolerantJobTest {
 protected:
  void StartWithProposal(bool heal) {
    v1::JobSpec spec = Spec(3);
    spec.set_global_batch_size(6);
    spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
    spec.mutable_fault_tolerance()->set_min_replicas(1);
    spec.mutable_fault_tolerance()->set_heal(heal);
    for (int w = 0; w < 3; ++w) AddWorker(absl::StrCat("w", w));
    auto submitted = core_.controller->Submit(spec);
    ASSERT_TRUE(submitted.ok()) << submitted.status();
    for (int r = 0; r < 3; ++r) Report(absl::StrCat("w", r), r, v1::JOINED);
    ASSERT_EQ(State(), v1::RUNNING);
    auto proposal = ProposeBf16AtStep10();
    ASSERT_TRUE(proposal.ok()) << proposal.status();
    version_ = proposal->version();
  }
  void Accept(const std::string& worker) {
    v1::HookChangeAck ack;
    ack.set_job_id("job-1");
    ack.set_attempt(1);
    ack.set_version(version_);
    ack.set_accepted(true);
    core_.controller->OnHookAck(worker, ack);
  }
  v1::HookSwitch::State SwitchState() { return core_.jobs->Get("job-1")->hook_switches(0).state(); }
  int32_t version_ = 0;
};

// A replica lost while the switch is agreed, after the live ranks accepted: the switch
// commits with the membership change instead of waiting for the rank that left.
TEST_F(FaultTolerantHookTest, ASwitchTheLiveRanksAcceptedCommitsWhenTheOthersLeave) {
  StartWithProposal(/*heal=*/false);  // with heal, w2, idle again, would take rank 2 back
  Accept("w0");
  Accept("w1");
  EXPECT_EQ(SwitchState(), v1::HookSwitch::PROPOSED);
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(SwitchState(), v1::HookSwitch::APPLIED);
  bool committed = false;
  for (const auto& message : Received("w0")) {
    committed |= message.has_hook_decision() && message.hook_decision().commit();
  }
  EXPECT_TRUE(committed);
}

// A replica lost and replaced while the switch is agreed (only rank 0 had accepted, and
// the lost rank): the replacement is sent the proposal after its assignment, and the
// switch commits once it and rank 1 accept too.
TEST_F(FaultTolerantHookTest, AReplacementIsAskedAboutTheSwitchBeingAgreed) {
  StartWithProposal(/*heal=*/true);
  Accept("w0");
  Accept("w2");  // its rank is lost next: this answer does not count for its replacement
  Received("w2");
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1, 2}));  // healed on w2, idle again
  const std::vector<v1::CoordinatorMessage> sent = Received("w2");
  ASSERT_GE(sent.size(), 2u);
  EXPECT_TRUE(sent[0].has_assignment());
  EXPECT_EQ(sent.back().hook_change().version(), version_);
  Accept("w1");
  EXPECT_EQ(SwitchState(), v1::HookSwitch::PROPOSED);
  Accept("w2");
  EXPECT_EQ(SwitchState(), v1::HookSwitch::APPLIED);
}

// A rank of the group that left reports its abort to a coordinator restarted after the
// loss, before the live ranks re-attach: it had already left, so the attempt goes on.
TEST_F(FaultTolerantJobTest, ALeftRanksAbortAfterARestartChangesNothing) {
  StartHybridJob();
  core_.controller->OnReport("w3", Said(3, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  StartCoordinator();
  const v1::RunningAttempt left = RunningRank(2);
  AddWorker("w2", &left);
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "rank left the attempt with its group"));
  EXPECT_EQ(State(), v1::RUNNING);
  for (int rank : {1, 0}) {
    const v1::RunningAttempt running = RunningRank(rank);
    AddWorker(absl::StrCat("w", rank), &running);
  }
  clock_.Advance(absl::Seconds(31));
  for (const char* worker : {"w0", "w1"}) Heartbeat(worker, "job-1", 1);
  core_.controller->CheckHeartbeats();
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_EQ(core_.jobs->Get("job-1")->attempt(), 1);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
}

// Killed with a rank (its worker never comes back): past the re-attach grace, the rank's
// group leaves as it would have had the coordinator seen the loss, instead of a re-queue.
TEST_F(FaultTolerantJobTest, AfterARestartARankThatNeverComesBackLeavesWithItsGroup) {
  StartHybridJob();
  StartCoordinator();
  for (int rank : {0, 1, 2}) {
    const v1::RunningAttempt running = RunningRank(rank);
    AddWorker(absl::StrCat("w", rank), &running);
  }
  for (int second = 1; second <= 31; ++second) {
    clock_.Advance(absl::Seconds(1));
    for (const char* worker : {"w0", "w1", "w2"}) Heartbeat(worker, "job-1", 1);
    core_.controller->CheckHeartbeats();
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_NE(job.events().rbegin()->message().find("only 3 of 4 ranks re-attached"),
            std::string::npos)
      << job.events().rbegin()->message();
  EXPECT_TRUE(GotMembershipChange("w0"));
  EXPECT_TRUE(GotAbort("w2"));
}

// A rank's worker restarted with the coordinator (both died; the worker came back first,
// within the grace, without the attempt): the attempt goes on without that rank's group
// after the peer timeout (10 s), as for a loss the coordinator saw, instead of a re-queue.
TEST_F(FaultTolerantJobTest, AfterARestartARankBackWithoutItsAttemptLeavesWithItsGroup) {
  StartHybridJob();
  StartCoordinator();
  for (int rank : {0, 1, 2}) {
    const v1::RunningAttempt running = RunningRank(rank);
    AddWorker(absl::StrCat("w", rank), &running);
  }
  AddWorker("w3");  // its daemon restarted: it runs nothing
  EXPECT_EQ(State(), v1::RUNNING);
  EXPECT_NE(core_.jobs->Get("job-1")->events().rbegin()->message().find(
                "worker w3 registered again without the attempt"),
            std::string::npos);
  for (int second = 1; second <= 11; ++second) {
    clock_.Advance(absl::Seconds(1));
    for (const char* worker : {"w0", "w1", "w2"}) Heartbeat(worker, "job-1", 1);
    Heartbeat("w3");
    core_.controller->CheckHeartbeats();
    if (second == 9) {  // not yet: the peer timeout is 10 s
      EXPECT_FALSE(absl::StrContains(Events(), "ranks 2, 3 left")) << Events();
      EXPECT_FALSE(GotAbort("w2")) << "left before the peer timeout";
    }
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::RUNNING);
  EXPECT_EQ(job.attempt(), 1);
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(GotMembershipChange("w0"));
  EXPECT_TRUE(GotAbort("w2"));
}

// A replacement is told to wait for the live ranks' move beyond the collective timeout
// by two of the attempt's longest steps (95 s here, then 20 s): they move at a step
// boundary, and a wait of the collective timeout alone failed every heal of a job whose
// steps are longer.
TEST_F(FaultTolerantJobTest, AJoinerWaitsForTheLiveRanksTwoOfTheirLongestSteps) {
  StartHybridJob();
  for (double seconds : {95.0, 20.0}) {
    v1::AttemptReport progress = Said(0, v1::PROGRESS, "");
    progress.mutable_progress()->set_step(seconds > 50 ? 10 : 11);
    progress.mutable_progress()->set_step_seconds(seconds);
    core_.controller->OnReport("w0", progress);
  }
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  AddWorker("w9");
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  ASSERT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 2);
  const std::vector<v1::CoordinatorMessage> sent = Received("w9");
  ASSERT_FALSE(sent.empty());
  ASSERT_TRUE(sent.back().assignment().has_join());
  const absl::Duration timeout = options_.collective_timeout;
  EXPECT_EQ(sent.back().assignment().join_wait_ms(),
            absl::ToInt64Milliseconds(timeout + 2 * absl::Seconds(95)));
}

// Healing: a group lost, two idle workers (its drained mate, once it reports its end,
// and a spare): the group's ranks are placed there, told to join the next epoch, and the
// live ranks told it; the job's ranks name the new workers.
TEST_F(FaultTolerantJobTest, AGroupThatLeftIsReplacedOnIdleWorkers) {
  StartHybridJob();
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  Received("w0");
  Received("w1");
  AddWorker("w9");  // a spare: one idle worker is not enough for a group of two
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.membership().epoch(), 2);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(job.ranks(2).worker_id(), "w2");
  EXPECT_EQ(job.ranks(3).worker_id(), "w9");
  for (const char* joiner : {"w2", "w9"}) {
    const std::vector<v1::CoordinatorMessage> sent = Received(joiner);
    ASSERT_FALSE(sent.empty()) << joiner;
    EXPECT_EQ(sent.back().assignment().join().epoch(), 2) << joiner;
    EXPECT_EQ(core_.workers->Get(joiner)->state(), v1::BUSY);
  }
  EXPECT_TRUE(GotMembershipChange("w0", 2));
  EXPECT_EQ(MembershipChanges("healed"), 1);
  // Both epochs are in the job's history, with what decided each.
  ASSERT_EQ(job.membership_history_size(), 2);
  EXPECT_EQ(job.membership_history(0).live_ranks_size(), 2);
  EXPECT_NE(job.membership_history(0).cause().find("rank 3 (worker w3) was lost"),
            std::string::npos)
      << job.membership_history(0).cause();
  EXPECT_EQ(job.membership_history(1).epoch(), 2);
  EXPECT_EQ(job.membership_history(1).live_ranks_size(), 4);
  EXPECT_NE(job.membership_history(1).cause().find("a replacement for ranks 2, 3 joins"),
            std::string::npos);
  // The live ranks finish before the replacement trained a step: the job ends without
  // it, and it is told to stop.
  Report("w0", 0, v1::COMPLETED);
  Report("w1", 1, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
  const std::vector<v1::CoordinatorMessage> stop = Received("w9");
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_EQ(stop[0].abort().reason(), "the job completed before this replacement joined it");
}

// A worker that just completed a rank of another job (recorded in memory only, written
// with the next second's progress) and is taken by a heal: the completion is written
// before the heal's membership, or a crash between the two would leave a state file whose
// other job waits for that rank from a worker now training this one.
TEST_F(FaultTolerantJobTest, AHealWritesTheCompletionsOfTheWorkersItTakesFirst) {
  StartHybridJob();
  AddWorker("w7");
  AddWorker("w8");
  ASSERT_TRUE(core_.controller->Submit(Spec(2)).ok());  // job-2 on w7 and w8
  const v1::Job other = *core_.jobs->Get("job-2");
  const auto said = [&](const std::string& worker, v1::AttemptPhase phase) {
    for (const v1::RankAssignment& rank : other.ranks()) {
      if (rank.worker_id() != worker) continue;
      v1::AttemptReport report;
      report.set_job_id("job-2");
      report.set_attempt(1);
      report.set_rank(rank.rank());
      report.set_phase(phase);
      report.set_led(false);
      core_.controller->OnReport(worker, report);
    }
  };
  said("w7", v1::JOINED);
  said("w8", v1::JOINED);
  ASSERT_EQ(core_.jobs->Get("job-2")->state(), v1::RUNNING);
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  ASSERT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);  // w2 alone is no group

  said("w8", v1::COMPLETED);  // w8 idle: the heal takes it with w2
  ASSERT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 2);
  ASSERT_EQ(core_.workers->Get("w8")->job_id(), "job-1");

  StartCoordinator();  // a crash: nothing flushed but what was written
  const v1::Job after = *core_.jobs->Get("job-2");
  EXPECT_EQ(after.state(), v1::RUNNING);
  EXPECT_EQ(after.completion().ranks_size(), 1);
}

// A replacement whose host lacks the inputs the live ranks train on: its host is to
// blame at once (quarantined, so the next heal goes elsewhere), its group leaves again,
// and the job trains on without it.
TEST_F(FaultTolerantJobTest, AReplacementWhoseHostLacksTheInputsIsKeptOut) {
  StartHybridJob();
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  AddWorker("w9");
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3}));
  ASSERT_EQ(core_.jobs->Get("job-1")->ranks(3).worker_id(), "w9");
  v1::AttemptReport missing =
      Said(3, v1::ABORTED, "job.data.tokens.train_path: '/data/train.bin': no readable file");
  missing.set_permanent(true);
  missing.set_inputs_missing(true);
  core_.controller->OnReport("w9", missing);
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::RUNNING) << job.reason();
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(job.membership().epoch(), 3);
  EXPECT_NE(core_.workers->Get("w9")->quarantine_reason().find(
                "could not find the job's inputs on its host, which the live ranks read on "
                "theirs"),
            std::string::npos)
      << core_.workers->Get("w9")->quarantine_reason();
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_TRUE(GotAbort("w2"));  // its group mate, told to stop
  // The job completes without them; the mate (ended, perhaps on another job by then) is
  // not told to stop again.
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  Report("w0", 0, v1::COMPLETED);
  Report("w1", 1, v1::COMPLETED);
  EXPECT_EQ(State(), v1::SUCCEEDED);
  EXPECT_FALSE(GotAbort("w2"));
}

// A replacement meets the live ranks in their collectives: it goes only to a worker of
// their data-plane version, never to an idle worker of another release beside it.
TEST_F(FaultTolerantJobTest, AReplacementIsOfTheLiveRanksDataPlaneVersion) {
  StartHybridJob();
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  data_plane_versions_["w8"] = 2;  // a worker already upgraded to another data plane
  AddWorker("w8");
  EXPECT_EQ(core_.workers->Get("w8")->data_plane_version(), 2);
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);  // w2 and w8 may not pair
  AddWorker("w9");
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.membership().epoch(), 2);
  EXPECT_EQ(job.ranks(2).worker_id(), "w2");
  EXPECT_EQ(job.ranks(3).worker_id(), "w9");
  EXPECT_EQ(core_.workers->Get("w8")->state(), v1::IDLE);
}

// During a rolling upgrade the idle workers may all be of the new release: a degraded job
// they cannot heal says why, once (the heal pass runs every second), and heals once a
// worker of its own version is idle.
TEST_F(FaultTolerantJobTest, ADegradedJobThatOnlyOtherVersionsCouldHealSaysSoOnce) {
  StartHybridJob();
  core_.controller->CloseSession("w3", outboxes_.at("w3"));  // w3 dies
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  const std::string said =
      "the job is not healed: its live ranks run data-plane version 0, and the idle workers "
      "that would take a group (2 of version 2) are of another";
  for (const char* upgraded : {"w7", "w8"}) {
    data_plane_versions_[upgraded] = 2;
    AddWorker(upgraded);
  }
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);
  core_.controller->Schedule();  // another heal pass
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(std::count_if(job.events().begin(), job.events().end(),
                          [&](const v1::JobEvent& event) {
                            return absl::StrContains(event.message(), said);
                          }),
            1)
      << Events();

  AddWorker("w9");  // of version 0: with w2, a group
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 2) << Events();
  EXPECT_EQ(core_.jobs->Get("job-1")->ranks(3).worker_id(), "w9");
}

// A flapping worker (it leaves, is healed back in, leaves again) is held off the attempt
// from its second leave, for a minute, then two: the job trains on degraded meanwhile
// instead of going through an epoch per step.
TEST_F(FaultTolerantJobTest, AWorkerThatLeavesAgainIsHeldOffTheAttempt) {
  StartHybridJob();
  for (int leave = 1; leave <= 2; ++leave) {
    core_.controller->OnReport("w3", Said(3, v1::ABORTED, "a collective failed"));
    core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
    if (leave == 1) {  // healed back in at once: w2 and w3 are idle again
      ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3})) << Events();
      Report("w2", 2, v1::JOINED);
      Report("w3", 3, v1::JOINED);
    }
  }
  // After its `leaves`-th leave w3 is held off for `held_off_seconds` (the job trains on degraded),
  // then healed back in.
  const auto expect_held_off = [&](int leaves, int held_off_seconds, const char* shown) {
    EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1})) << Events();
    EXPECT_TRUE(absl::StrContains(Events(), absl::StrCat("worker w3 left attempt 1 ", leaves,
                                                         " times: it is not placed in it "
                                                         "again for ",
                                                         shown)))
        << Events();
    const int32_t epoch = core_.jobs->Get("job-1")->membership().epoch();
    clock_.Advance(absl::Seconds(held_off_seconds - 1));
    core_.controller->Schedule();
    EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), epoch);
    clock_.Advance(absl::Seconds(2));
    core_.controller->Schedule();
    EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3})) << Events();
    EXPECT_EQ(core_.jobs->Get("job-1")->ranks(3).worker_id(), "w3");
  };
  expect_held_off(2, 60, "1m");

  // A third leave holds it off twice as long.
  Report("w2", 2, v1::JOINED);
  Report("w3", 3, v1::JOINED);
  core_.controller->OnReport("w3", Said(3, v1::ABORTED, "a collective failed"));
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  expect_held_off(3, 120, "2m");
}

// A degraded job whose live ranks are finishing takes no replacement: none would join.
TEST_F(FaultTolerantJobTest, NoReplacementOnceALiveRankCompleted) {
  StartHybridJob();
  core_.controller->OnReport("w3", Said(3, v1::ABORTED, "a collective failed"));
  Report("w1", 1, v1::COMPLETED);
  AddWorker("w9");
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "aborted: rank left the attempt"));
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);
  EXPECT_EQ(core_.workers->Get("w9")->state(), v1::IDLE);
}

// The rank leading at the end lost after the others completed as followers (they wrote
// nothing): the attempt fails, as no rank wrote the job's outputs; it does not succeed
// on the survivors' completions.
TEST_F(FaultTolerantJobTest, ALeaderLostAfterTheOthersCompletedFailsTheAttempt) {
  StartHybridJob();
  for (int rank : {1, 2, 3}) Report(absl::StrCat("w", rank), rank, v1::COMPLETED);
  EXPECT_EQ(State(), v1::RUNNING);
  core_.controller->OnReport(
      "w0", Said(0, v1::ABORTED, "writing the final model: No space left on device"));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_NE(job.reason().find("led at the end was lost before it wrote the job's outputs"),
            std::string::npos)
      << job.reason();
  EXPECT_TRUE(job.result().empty());
}

// A rank of a group that left says it led (a bug, or a worker lying): it is not the
// newest membership's, so its completion is a follower's, and the real leader's loss
// before it wrote the outputs still fails the attempt, though the groups left completed.
TEST_F(FaultTolerantJobTest, ARankOutsideTheMembershipDoesNotLead) {
  StartHybridJob(/*world=*/6);
  core_.controller->OnReport("w0", Said(0, v1::LEAVING, "its worker is shutting down"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{2, 3, 4, 5}));
  v1::AttemptReport claimed = Said(1, v1::COMPLETED, "a result of no membership's");
  claimed.set_led(true);
  core_.controller->OnReport("w1", claimed);
  for (int rank : {3, 4, 5}) Report(absl::StrCat("w", rank), rank, v1::COMPLETED);
  core_.controller->OnReport(
      "w2", Said(2, v1::ABORTED, "writing the final model: No space left on device"));
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::FAILED);
  EXPECT_TRUE(absl::StrContains(job.reason(), "led at the end was lost")) << job.reason();
  EXPECT_TRUE(job.result().empty()) << job.result();
}

// The leader dropped with its group after it wrote the outputs (its mate lost while it
// wrote them) still led: its completion is the job's result, and the job succeeds.
TEST_F(FaultTolerantJobTest, ALeaderDroppedWithItsGroupAfterItWroteTheOutputsStillLed) {
  StartHybridJob(/*world=*/6);
  core_.controller->OnReport("w1", Said(1, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{2, 3, 4, 5}));
  v1::AttemptReport led = Said(0, v1::COMPLETED, "trained 100 steps");
  led.set_led(true);
  core_.controller->OnReport("w0", led);
  for (int rank : {2, 3, 4, 5}) {
    core_.controller->OnReport(absl::StrCat("w", rank), Said(rank, v1::COMPLETED, "follower"));
  }
  const v1::Job job = *core_.jobs->Get("job-1");
  EXPECT_EQ(job.state(), v1::SUCCEEDED) << job.reason();
  EXPECT_EQ(job.result(), "trained 100 steps");
}

// A rank's STATE_RECEIVED is an event once per epoch of the attempt's memberships: the
// same report again, or one naming an epoch the attempt never had, writes nothing.
TEST_F(FaultTolerantJobTest, AStateTransferIsRecordedOncePerRankAndEpoch) {
  StartHybridJob();
  v1::AttemptReport received = Said(1, v1::STATE_RECEIVED, "");
  received.mutable_transfer()->set_epoch(0);
  received.mutable_transfer()->set_donor_rank(3);
  for (int i = 0; i < 3; ++i) core_.controller->OnReport("w1", received);
  received.mutable_transfer()->set_epoch(1 << 30);
  core_.controller->OnReport("w1", received);
  const std::string events = Events();
  int took = 0;
  for (absl::string_view line : absl::StrSplit(events, '\n'))
    took += absl::StrContains(line, "took shard");
  EXPECT_EQ(took, 1) << events;
}

// After a heal that puts rank 0 back, the ranks that trained on speak for the job until
// the replacement steps: rank 2's progress is the job's, its completion as a follower
// is not the job's result.
TEST_F(FaultTolerantJobTest, ARanksProgressSpeaksForTheJobUntilItsReplacementTrains) {
  StartHybridJob();
  core_.controller->CloseSession("w0", outboxes_.at("w0"));  // w0 dies: {0, 1} leave
  ASSERT_EQ(Live(), (std::vector<int32_t>{2, 3}));
  AddWorker("w9");
  core_.controller->OnReport("w1", Said(1, v1::ABORTED, "aborted: rank left the attempt"));
  ASSERT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3}));  // a replacement for ranks 0, 1
  v1::AttemptReport progress = Said(2, v1::PROGRESS, "");
  progress.mutable_progress()->set_step(41);
  core_.controller->OnReport("w2", progress);
  EXPECT_EQ(core_.jobs->Get("job-1")->progress().step(), 41);
  // The joiner trains: it speaks from then on.
  v1::AttemptReport joined = Said(0, v1::PROGRESS, "");
  joined.mutable_progress()->set_step(42);
  core_.controller->OnReport(core_.jobs->Get("job-1")->ranks(0).worker_id(), joined);
  progress.mutable_progress()->set_step(40);
  core_.controller->OnReport("w2", progress);
  EXPECT_EQ(core_.jobs->Get("job-1")->progress().step(), 42);
}

// A job scaled down stays down: its next attempt places every rank (world_size), and the
// groups above the target are asked to leave as soon as it runs.
TEST_F(FaultTolerantJobTest, AJobScaledDownIsScaledDownAgainInItsNextAttempt) {
  StartHybridJob(4, 0, /*max_restarts=*/1);
  ASSERT_TRUE(core_.controller->Scale("job-1", 1).ok());
  const auto asked_to_leave = [&](const std::string& worker, int attempt) {
    for (const auto& message : Received(worker)) {
      if (message.has_leave() && message.leave().attempt() == attempt) return true;
    }
    return false;
  };
  EXPECT_TRUE(asked_to_leave("w3", 1));
  // Attempt 1 fails before the group left: {0, 1} lost, then rank 2, below min_replicas.
  core_.controller->OnReport("w0", Said(0, v1::ABORTED, "a collective failed"));
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "a collective failed"));
  ASSERT_EQ(State(), v1::PENDING);
  for (int w = 4; w < 8; ++w) AddWorker(absl::StrCat("w", w));
  ASSERT_EQ(State(), v1::SCHEDULED);
  const v1::Job second = *core_.jobs->Get("job-1");
  ASSERT_EQ(second.attempt(), 2);
  ASSERT_EQ(second.target_replicas(), 1);
  for (int r = 0; r < 4; ++r) Received(second.ranks(r).worker_id());
  for (int r = 0; r < 4; ++r) Report(second.ranks(r).worker_id(), r, v1::JOINED, 2);
  ASSERT_EQ(State(), v1::RUNNING);
  EXPECT_FALSE(asked_to_leave(second.ranks(1).worker_id(), 2));
  EXPECT_TRUE(asked_to_leave(second.ranks(2).worker_id(), 2));
  EXPECT_TRUE(asked_to_leave(second.ranks(3).worker_id(), 2));
}

// A scale-down's requests to leave die with a coordinator restarted before the group
// left: each re-attaching rank above the target is asked again.
TEST_F(FaultTolerantJobTest, AReattachedRankAboveTheTargetIsAskedToLeaveAgain) {
  StartHybridJob();
  ASSERT_TRUE(core_.controller->Scale("job-1", 1).ok());
  StartCoordinator();
  for (int rank = 0; rank < 4; ++rank) {
    const v1::RunningAttempt running = RunningRank(rank);
    AddWorker(absl::StrCat("w", rank), &running);
  }
  for (int rank = 0; rank < 4; ++rank) {
    bool asked = false;
    for (const auto& message : Received(absl::StrCat("w", rank))) asked |= message.has_leave();
    EXPECT_EQ(asked, rank >= 2) << "rank " << rank;
  }
}

// Scaling: down, the ranks of the highest live group are asked to leave (and leave when
// one says LEAVING); up, a replacement joins on idle workers; out of range or on a job
// without fault tolerance, refused naming the field and the value.
TEST_F(FaultTolerantJobTest, ScalingAsksTheHighestGroupToLeaveAndHealsBackUp) {
  StartHybridJob();
  EXPECT_EQ(core_.controller->Scale("job-1", 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(core_.controller->Scale("job-1", 0).status().message())
                .find("replicas must be 1 (fault_tolerance.min_replicas) to 2 (the groups of "
                      "world_size 4; fault_tolerance.max_replicas lets a job grow past them), "
                      "got 0"),
            std::string::npos);
  auto scaled = core_.controller->Scale("job-1", 1);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->target_replicas(), 1);
  for (const char* worker : {"w2", "w3"}) {
    const std::vector<v1::CoordinatorMessage> sent = Received(worker);
    ASSERT_FALSE(sent.empty()) << worker;
    EXPECT_EQ(sent.back().leave().job_id(), "job-1") << worker;
  }
  EXPECT_TRUE(Received("w0").empty());
  core_.controller->OnReport("w3", Said(3, v1::LEAVING, "the job is scaled to 1 replica groups"));
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(MembershipChanges("scaled_down"), 1);  // planned: neither a loss nor a drain
  EXPECT_EQ(MembershipChanges("left"), 0);
  EXPECT_EQ(MembershipChanges("lost"), 0);
  // Its ranks end by themselves, their workers idle: no replacement below the target.
  core_.controller->OnReport("w2", Said(2, v1::ABORTED, "rank 2 left the attempt with its group"));
  core_.controller->OnReport("w3", Said(3, v1::ABORTED, "rank 3 left the attempt with its group"));
  EXPECT_EQ(core_.workers->Get("w3")->state(), v1::IDLE);
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 1);
  // Up again: the idle workers take the group back.
  ASSERT_TRUE(core_.controller->Scale("job-1", 2).ok());
  EXPECT_EQ(core_.jobs->Get("job-1")->membership().epoch(), 2);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3}));
  // Ranks 2 and 3 had left this attempt: their return counts as healed, not grown.
  EXPECT_EQ(MembershipChanges("healed"), 1);
  EXPECT_EQ(MembershipChanges("grown"), 0);
}

// Growth past world_size (fault_tolerance.max_replicas 3, one group of 2 to start):
// scaled to 3, both groups not placed yet join in one epoch on the idle workers, as ranks
// 2 to 5, the job's list of ranks growing with them; above max_replicas, refused.
TEST_F(FaultTolerantJobTest, AJobGrowsPastItsWorldSizeUpToMaxReplicas) {
  StartHybridJob(/*world=*/2, /*max_replicas=*/3);
  // Spare workers: the job stays at its initial size until scaled.
  for (int w = 2; w < 6; ++w) AddWorker(absl::StrCat("w", w));
  EXPECT_EQ(core_.workers->Get("w2")->state(), v1::IDLE);
  const absl::Status above = core_.controller->Scale("job-1", 4).status();
  EXPECT_NE(std::string(above.message())
                .find("replicas must be 1 (fault_tolerance.min_replicas) to 3 "
                      "(fault_tolerance.max_replicas), got 4"),
            std::string::npos)
      << above;
  ASSERT_TRUE(core_.controller->Scale("job-1", 3).ok());
  const v1::Job grown = *core_.jobs->Get("job-1");
  EXPECT_EQ(grown.membership().epoch(), 1);
  EXPECT_EQ(MembershipChanges("grown"), 1);  // one epoch, new ranks
  EXPECT_EQ(MembershipChanges("healed"), 0);
  EXPECT_EQ(Live(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  ASSERT_EQ(grown.ranks_size(), 6);
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(grown.ranks(r).rank(), r);
    EXPECT_EQ(grown.ranks(r).worker_id(), absl::StrCat("w", r));
  }
  EXPECT_NE(Events().find("ranks 2, 3, 4, 5 join, growing the job (rank 2 on w2, rank 3 on w3, "
                          "rank 4 on w4, rank 5 on w5)"),
            std::string::npos)
      << Events();
  for (int w = 2; w < 6; ++w) {
    const std::vector<v1::CoordinatorMessage> sent = Received(absl::StrCat("w", w));
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].assignment().rank(), w);
    EXPECT_EQ(sent[0].assignment().join().epoch(), 1);
  }
  EXPECT_TRUE(GotMembershipChange("w0"));
}

TEST_F(JobControllerTest, OnlyARunningFaultTolerantJobScales) {
  StartTwoRankJob();
  const absl::Status refused = core_.controller->Scale("job-1", 1).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(refused.message()).find("has no fault_tolerance"), std::string::npos)
      << refused;
  EXPECT_EQ(core_.controller->Scale("job-9", 1).status().code(), absl::StatusCode::kNotFound);

  // A fault-tolerant job waiting for workers (job-1 holds both) is not scaled either.
  v1::JobSpec waiting = Spec(4);
  waiting.set_global_batch_size(24);
  waiting.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  waiting.mutable_fsdp()->set_shard_group_size(2);
  waiting.mutable_fault_tolerance()->set_min_replicas(1);
  auto pending = core_.controller->Submit(waiting);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(core_.jobs->Get(pending->id())->state(), v1::PENDING);
  const absl::Status not_running = core_.controller->Scale(pending->id(), 1).status();
  EXPECT_EQ(not_running.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(not_running.message()).find("is PENDING"), std::string::npos)
      << not_running;
  EXPECT_EQ(std::string(not_running.message()).find("has no fault_tolerance"), std::string::npos)
      << not_running;
  // Replicas its spec does not allow are wrong in any state: said as such.
  const absl::Status too_many = core_.controller->Scale(pending->id(), 5).status();
  EXPECT_EQ(too_many.code(), absl::StatusCode::kInvalidArgument) << too_many;
  EXPECT_NE(std::string(too_many.message())
                .find("replicas must be 1 (fault_tolerance.min_replicas)"
                      " to 2"),
            std::string::npos)
      << too_many;
  // No replicas is wrong for any job: said as such.
  const absl::Status none = core_.controller->Scale("job-1", 0).status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument) << none;
  EXPECT_NE(std::string(none.message()).find("replicas must be at least 1, got 0"),
            std::string::npos)
      << none;
}

}  // namespace
}  // namespace shardwise
