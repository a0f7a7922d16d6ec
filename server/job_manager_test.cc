#include "server/job_manager.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "server/job_record_bound.h"

namespace shardwise {
namespace {

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::ScratchPath("jobs-") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    unlink(path_.c_str());
    Reopen();
  }

  void Reopen() {
    manager_.reset();
    store_.reset();
    auto store = StateStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto manager = JobManager::Create(store_.get(), JobManager::Options{});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
  }

  static v1::JobSpec Spec(int world) {
    v1::JobSpec spec;
    spec.set_world_size(world);
    spec.set_steps(10);
    return spec;
  }

  static std::vector<v1::RankAssignment> Ranks(int world) {
    std::vector<v1::RankAssignment> ranks(world);
    for (int r = 0; r < world; ++r) {
      ranks[r].set_rank(r);
      ranks[r].set_worker_id("w" + std::to_string(r));
    }
    return ranks;
  }

  std::string path_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<JobManager> manager_;
};

// A job that heals for weeks: its record keeps the first and the newest membership epochs,
// in memory and in the state file, and the newest epoch still takes its first step.
TEST_F(JobManagerTest, AJobsMembershipHistoryIsBoundedAndSurvivesARestart) {
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(2)).ok());
  const int epochs = kFirstMembershipEpochsKept + kNewestMembershipEpochsKept + 3;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    v1::Membership membership;
    membership.set_attempt(1);
    membership.set_epoch(epoch);
    membership.add_live_ranks(0);
    ASSERT_TRUE(
        manager_->RecordMembership("job-1", membership, absl::StrCat("heal ", epoch), {}).ok());
  }
  ASSERT_TRUE(manager_->RecordEpochStart("job-1", 1, epochs, 77).ok());
  Reopen();
  auto job = manager_->Get("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->membership_history_size(),
            kFirstMembershipEpochsKept + kNewestMembershipEpochsKept);
  EXPECT_EQ(job->membership_epochs_omitted(), 3);
  EXPECT_EQ(job->membership_history(0).epoch(), 1);
  const v1::MembershipEpoch& newest = *job->membership_history().rbegin();
  EXPECT_EQ(newest.epoch(), epochs);
  EXPECT_EQ(newest.first_step(), 77);
  EXPECT_EQ(newest.cause(), absl::StrCat("heal ", epochs));
  // The epochs the record left out are in the events the state file keeps: each decision
  // (its cause), and the step each epoch trained from, said once.
  EXPECT_TRUE(absl::IsAlreadyExists(manager_->RecordEpochStart("job-1", 1, epochs, 78).status()));
  EXPECT_TRUE(absl::IsAlreadyExists(manager_->RecordEpochStart("job-1", 1, 1 << 30, 5).status()));
  job = manager_->Get("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->membership_history().rbegin()->first_step(), 77);
  int trains_from = 0;
  for (const v1::JobEvent& event : job->events()) {
    trains_from += absl::StrContains(event.message(), "trains from step");
  }
  EXPECT_EQ(trains_from, 1);
  EXPECT_TRUE(absl::c_any_of(job->events(), [&](const v1::JobEvent& event) {
    return event.message() == absl::StrCat("membership epoch ", epochs,
                                           " trains from step 77 (decided at step 0): ranks 0");
  }));
}

TEST_F(JobManagerTest, FullLifecycle) {
  auto job = manager_->Submit(Spec(2));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->id(), "job-1");
  EXPECT_EQ(job->state(), v1::PENDING);
  EXPECT_EQ(job->progress().total_steps(), 10);

  auto scheduled = manager_->Schedule("job-1", Ranks(2));
  ASSERT_TRUE(scheduled.ok()) << scheduled.status();
  EXPECT_EQ(scheduled->state(), v1::SCHEDULED);
  EXPECT_EQ(scheduled->attempt(), 1);
  EXPECT_EQ(scheduled->ranks_size(), 2);
  EXPECT_EQ(scheduled->events().rbegin()->message(),
            "attempt 1 scheduled: rank 0 on w0, rank 1 on w1");

  ASSERT_TRUE(manager_->MarkRunning("job-1", 1).ok());
  auto done = manager_->Finish("job-1", 1, v1::SUCCEEDED, "all ranks completed", "model at /x");
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), v1::SUCCEEDED);
  EXPECT_EQ(done->result(), "model at /x");
  EXPECT_EQ(done->events_size(), 4);
}

// Ids repeat across state files (a coordinator started over numbers from job-1 again);
// each job also gets a uid of 128 random bits, kept with it, which what it writes names.
TEST_F(JobManagerTest, EachJobGetsAUidOfItsOwnThatSurvivesARestart) {
  auto first = manager_->Submit(Spec(1));
  auto second = manager_->Submit(Spec(1));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->uid().size(), 32u);
  EXPECT_EQ(first->uid().find_first_not_of("0123456789abcdef"), std::string::npos) << first->uid();
  EXPECT_NE(first->uid(), second->uid());
  Reopen();
  EXPECT_EQ(manager_->Get("job-1")->uid(), first->uid());

  // A coordinator started over from an empty state file: job-1 again, another uid.
  manager_.reset();
  store_.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) unlink((path_ + suffix).c_str());
  Reopen();
  auto again = manager_->Submit(Spec(1));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), "job-1");
  EXPECT_NE(again->uid(), first->uid());
}

TEST_F(JobManagerTest, RefusesTransitionsOutOfOrder) {
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  EXPECT_EQ(manager_->MarkRunning("job-1", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  EXPECT_EQ(manager_->Schedule("job-1", Ranks(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A report of another attempt must not touch this one.
  EXPECT_EQ(manager_->Finish("job-1", 7, v1::FAILED, "stale").status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(manager_->Finish("job-1", 1, v1::FAILED, "boom").ok());
  EXPECT_EQ(
      manager_->Finish("job-1", JobManager::kAnyAttempt, v1::CANCELLED, "late").status().code(),
      absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(manager_->Get("job-404").status().code(), absl::StatusCode::kNotFound);
}

// A cancellation the state file refuses (here another connection holds its write lock
// past the store's busy timeout) is UNAVAILABLE and changes nothing, so the controller
// stops no rank for a job a restarted coordinator would run again; asked again once the
// file takes writes, it is written and outlives a restart.
TEST_F(JobManagerTest, ACancellationTheStateFileRefusesChangesNothing) {
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  ASSERT_TRUE(manager_->MarkRunning("job-1", 1).ok());
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE;", nullptr, nullptr, nullptr), SQLITE_OK);
  const auto refused = manager_->Cancel("job-1", "cancelled by request");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(manager_->Get("job-1")->state(), v1::RUNNING);
  ASSERT_EQ(sqlite3_exec(other, "ROLLBACK;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  ASSERT_TRUE(manager_->Cancel("job-1", "cancelled by request").ok());
  Reopen();
  EXPECT_EQ(manager_->Get("job-1")->state(), v1::CANCELLED);
}

TEST_F(JobManagerTest, RequeueStartsANewAttemptAndCountsRestarts) {
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(2)).ok());
  auto requeued = manager_->Requeue("job-1", 1, "rank 1 lost", /*counts_as_restart=*/true);
  ASSERT_TRUE(requeued.ok());
  EXPECT_EQ(requeued->state(), v1::PENDING);
  EXPECT_EQ(requeued->restarts(), 1);
  EXPECT_EQ(requeued->ranks_size(), 0);
  auto again = manager_->Schedule("job-1", Ranks(2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->attempt(), 2);
}

// After a crash, SCHEDULED attempts (joining through the rendezvous, which is gone) are
// re-queued; RUNNING ones stay RUNNING for their ranks to re-attach (JobController).
TEST_F(JobManagerTest, RestartRequeuesScheduledJobsAndKeepsRunningOnes) {
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());  // job-1: will be scheduled
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());  // job-2: stays pending
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());  // job-3: finished
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());  // job-4: running
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(2)).ok());
  ASSERT_TRUE(manager_->Schedule("job-3", Ranks(1)).ok());
  ASSERT_TRUE(manager_->Finish("job-3", 1, v1::SUCCEEDED, "done").ok());
  ASSERT_TRUE(manager_->Schedule("job-4", Ranks(1)).ok());
  ASSERT_TRUE(manager_->MarkRunning("job-4", 1).ok());

  Reopen();  // as after a crash: nothing but the file is kept

  auto page = manager_->List({}, "", 100);
  ASSERT_TRUE(page.ok());
  const std::vector<v1::JobSummary>& jobs = page->jobs;
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].state(), v1::PENDING);
  EXPECT_EQ(jobs[0].reason(),
            "coordinator restarted while attempt 1 was SCHEDULED; re-queued as a new attempt");
  EXPECT_EQ(jobs[0].restarts(), 0);  // not the job's fault
  EXPECT_EQ(jobs[1].state(), v1::PENDING);
  EXPECT_EQ(jobs[2].state(), v1::SUCCEEDED);
  EXPECT_EQ(jobs[3].state(), v1::RUNNING);
  EXPECT_EQ(jobs[3].attempt(), 1);
  EXPECT_EQ(manager_->Get("job-4")->ranks_size(), 1);
  EXPECT_EQ(manager_->Live().size(), 3u);  // job-3 ended: memory holds its summary only
  // Ids continue after the highest one seen.
  auto next = manager_->Submit(Spec(1));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id(), "job-5");
  auto rescheduled = manager_->Schedule("job-1", Ranks(2));
  ASSERT_TRUE(rescheduled.ok());
  EXPECT_EQ(rescheduled->attempt(), 2);
}

TEST_F(JobManagerTest, HookSwitchesPersistAndAPendingOneDiesWithTheCoordinator) {
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(2)).ok());
  ASSERT_TRUE(manager_->MarkRunning("job-1", 1).ok());
  v1::HookSwitch applied;
  applied.set_version(1);
  applied.mutable_new_hook()->set_hook(v1::CommHook::BF16_COMPRESS);
  applied.set_step(4);
  applied.set_state(v1::HookSwitch::PROPOSED);
  ASSERT_TRUE(manager_->RecordHookSwitch("job-1", applied, "proposed").ok());
  applied.set_state(v1::HookSwitch::APPLIED);
  ASSERT_TRUE(manager_->RecordHookSwitch("job-1", applied, "applied").ok());
  v1::HookSwitch pending = applied;
  pending.set_version(2);
  pending.set_state(v1::HookSwitch::PROPOSED);
  pending.set_step(8);
  ASSERT_TRUE(manager_->RecordHookSwitch("job-1", pending, "proposed again").ok());

  Reopen();  // a crash with switch 2 still being agreed
  auto job = manager_->Get("job-1");
  ASSERT_TRUE(job.ok());
  ASSERT_EQ(job->hook_switches_size(), 2);  // the same version was updated, not added
  EXPECT_EQ(job->hook_switches(0).state(), v1::HookSwitch::APPLIED);
  EXPECT_EQ(job->hook_switches(1).state(), v1::HookSwitch::ABANDONED);
  EXPECT_EQ(job->hook_switches(1).reason(), "the coordinator restarted before every rank answered");
  EXPECT_EQ(job->state(), v1::RUNNING);  // its ranks re-attach, and are told
}

TEST_F(JobManagerTest, WaitForChangeWakesOnProgress) {
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  uint64_t version = 0;
  auto first = manager_->WaitForChange("job-1", &version, absl::Seconds(1));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(manager_->WaitForChange("job-1", &version, absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::thread reporter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    v1::Progress progress;
    progress.set_step(3);
    progress.set_loss(0.5);
    EXPECT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  });
  auto changed = manager_->WaitForChange("job-1", &version, absl::Seconds(10));
  reporter.join();
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(changed->progress().step(), 3);
  // Progress of another attempt is refused.
  EXPECT_FALSE(manager_->UpdateProgress("job-1", 9, v1::Progress()).ok());
}

TEST_F(JobManagerTest, AnEndedJobIsReadBackWholeFromTheStateFile) {
  v1::JobSpec spec = Spec(1);
  spec.set_name("kept");
  ASSERT_TRUE(manager_->Submit(spec, {}, "alice").ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  ASSERT_TRUE(manager_->Finish("job-1", 1, v1::FAILED, "boom").ok());
  EXPECT_TRUE(manager_->Live().empty());
  for (int reopened = 0; reopened < 2; ++reopened) {
    auto job = manager_->Get("job-1");
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->spec().name(), "kept");
    EXPECT_EQ(job->submitter(), "alice");
    EXPECT_EQ(job->state(), v1::FAILED);
    EXPECT_EQ(job->events_size(), 3);  // submitted, scheduled, failed
    Reopen();
  }
}

TEST_F(JobManagerTest, ListsSummariesInPagesWithFilters) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(manager_->Submit(Spec(1), {}, i % 2 == 0 ? "alice" : "bob").ok());
  }
  ASSERT_TRUE(manager_->Schedule("job-2", Ranks(1)).ok());
  ASSERT_TRUE(manager_->Finish("job-2", 1, v1::SUCCEEDED, "done").ok());

  std::vector<std::string> ids;
  std::string token;
  int pages = 0;
  do {
    auto page = manager_->List({}, token, 2);
    ASSERT_TRUE(page.ok());
    for (const auto& job : page->jobs) ids.push_back(job.id());
    token = page->next_page_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(ids, (std::vector<std::string>{"job-1", "job-2", "job-3", "job-4", "job-5"}));
  EXPECT_EQ(pages, 3);

  auto alices = manager_->List({.submitter = "alice"}, "", 10);
  ASSERT_TRUE(alices.ok());
  ASSERT_EQ(alices->jobs.size(), 3u);
  EXPECT_EQ(alices->jobs[1].id(), "job-3");
  auto ended = manager_->List({.states = {v1::SUCCEEDED, v1::FAILED}}, "", 10);
  ASSERT_TRUE(ended.ok());
  ASSERT_EQ(ended->jobs.size(), 1u);
  EXPECT_EQ(ended->jobs[0].id(), "job-2");
  EXPECT_EQ(ended->jobs[0].submitter(), "bob");
  // A page that ends exactly at the last match says there is no more.
  auto exact = manager_->List({.submitter = "bob"}, "", 2);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->jobs.size(), 2u);
  EXPECT_TRUE(exact->next_page_token.empty());
  EXPECT_EQ(manager_->List({}, "job-3", 2).status().code(), absl::StatusCode::kInvalidArgument);
}

// A call reads at most list_scan_limit jobs: a filter few jobs match gets short pages,
// even empty ones, each with a token to go on from, and every match exactly once.
TEST_F(JobManagerTest, ListingReadsABoundedNumberOfJobsACall) {
  auto manager = JobManager::Create(store_.get(), {.list_scan_limit = 2});
  ASSERT_TRUE(manager.ok()) << manager.status();
  manager_ = std::move(*manager);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(manager_->Submit(Spec(1), {}, i % 2 == 0 ? "alice" : "bob").ok());
  }
  const auto pages = [&](const std::string& submitter) {
    std::vector<std::vector<std::string>> read;
    std::string token;
    do {
      auto page = manager_->List({.submitter = submitter}, token, 10);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      read.emplace_back();
      for (const auto& job : page->jobs) read.back().push_back(job.id());
      token = page->next_page_token;
    } while (!token.empty());
    return read;
  };
  using Pages = std::vector<std::vector<std::string>>;
  EXPECT_EQ(pages("alice"), (Pages{{"job-1"}, {"job-3"}, {"job-5"}}));
  EXPECT_EQ(pages("bob"), (Pages{{"job-2"}, {"job-4"}, {}}));
  EXPECT_EQ(pages("carol"), (Pages{{}, {}, {}}));
}

TEST_F(JobManagerTest, ProgressReachesTheStateFileWhenFlushed) {
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  ASSERT_TRUE(manager_->MarkRunning("job-1", 1).ok());
  manager_->ChangedJobs(absl::ZeroDuration());
  v1::Progress progress;
  progress.set_step(3);
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  EXPECT_EQ(manager_->ChangedJobs(absl::ZeroDuration()), std::vector<std::string>{"job-1"});
  EXPECT_EQ(manager_->Get("job-1")->progress().step(), 3);  // shown at once
  Reopen();
  EXPECT_EQ(manager_->Get("job-1")->progress().step(), 0);  // not written yet

  ASSERT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  ASSERT_TRUE(manager_->FlushProgress().ok());
  Reopen();
  EXPECT_EQ(manager_->Get("job-1")->progress().step(), 3);
}

// The newest checkpoint step any attempt's progress named outlives the attempt (and the
// coordinator, once flushed): a later attempt's older one, or its progress naming none,
// leaves it.
TEST_F(JobManagerTest, TheNewestCheckpointReportedIsKeptAcrossAttempts) {
  v1::JobSpec spec = Spec(1);
  spec.mutable_output()->set_checkpoint_dir("/ckpt/job");
  spec.mutable_output()->set_checkpoint_interval_steps(2);
  ASSERT_TRUE(manager_->Submit(spec).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  v1::Progress progress;
  progress.set_step(5);
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  EXPECT_FALSE(manager_->Get("job-1")->has_checkpoint_step());
  progress.set_checkpoint_step(-1);  // no step's: not kept
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  EXPECT_FALSE(manager_->Get("job-1")->has_checkpoint_step());
  ASSERT_TRUE(manager_->RecordCheckpointStep("job-1", 1, 11).ok());  // past job.steps (10)
  EXPECT_FALSE(manager_->Get("job-1")->has_checkpoint_step());
  progress.set_checkpoint_step(4);
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 1, progress).ok());
  EXPECT_EQ(manager_->Get("job-1")->checkpoint_step(), 4);
  ASSERT_TRUE(manager_->FlushProgress().ok());
  Reopen();  // the coordinator restarted: the attempt is re-queued
  EXPECT_EQ(manager_->Get("job-1")->state(), v1::PENDING);
  EXPECT_EQ(manager_->Get("job-1")->checkpoint_step(), 4);

  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  ASSERT_EQ(manager_->Get("job-1")->attempt(), 2);
  progress.set_checkpoint_step(2);  // resumed from an older one: step 4 damaged
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 2, progress).ok());
  progress.clear_checkpoint_step();
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 2, progress).ok());
  EXPECT_EQ(manager_->Get("job-1")->checkpoint_step(), 4);
  progress.set_checkpoint_step(6);
  ASSERT_TRUE(manager_->UpdateProgress("job-1", 2, progress).ok());
  EXPECT_EQ(manager_->Get("job-1")->checkpoint_step(), 6);
  ASSERT_TRUE(manager_->RecordCheckpointStep("job-1", 2, 8).ok());  // any rank's
  EXPECT_EQ(manager_->Get("job-1")->checkpoint_step(), 8);
  EXPECT_FALSE(manager_->RecordCheckpointStep("job-1", 1, 10).ok());  // an attempt before

  // A job without a checkpoint folder keeps none, whatever a rank says.
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Schedule("job-2", Ranks(1)).ok());
  ASSERT_TRUE(manager_->UpdateProgress("job-2", 1, progress).ok());
  EXPECT_FALSE(manager_->Get("job-2")->has_checkpoint_step());
}

// The leader's completion (it wrote the job's outputs) is in the state file at once, a
// follower's with the next flush: a coordinator restarted in between must not run the
// attempt again for a leader it forgot.
TEST_F(JobManagerTest, TheLeadersCompletionIsWrittenAtOnce) {
  ASSERT_TRUE(manager_->Submit(Spec(2)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(2)).ok());
  ASSERT_TRUE(manager_->MarkRunning("job-1", 1).ok());
  ASSERT_TRUE(manager_->RecordCompletion("job-1", 1, 1, /*led=*/false, "").ok());
  ASSERT_TRUE(manager_->RecordCompletion("job-1", 1, 0, /*led=*/true, "trained 10 steps").ok());
  auto store = StateStore::Open(path_);  // what a restarted coordinator would read
  ASSERT_TRUE(store.ok()) << store.status();
  auto written = (*store)->LoadJob("job-1");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->completion().led());
  EXPECT_EQ(written->completion().result(), "trained 10 steps");
  // The follower's, recorded before, went with it.
  EXPECT_EQ(written->completion().ranks_size(), 2);
}

TEST_F(JobManagerTest, JobsEndedLongerAgoThanTheRetentionAreCompacted) {
  SimulatedClock clock;
  auto manager = JobManager::Create(store_.get(), {.clock = &clock});
  ASSERT_TRUE(manager.ok());
  manager_ = std::move(*manager);
  v1::JobSpec named = Spec(1);
  named.set_name("mlp");
  ASSERT_TRUE(manager_->Submit(named, {}, "alice").ok());
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Schedule("job-1", Ranks(1)).ok());
  ASSERT_TRUE(manager_->Finish("job-1", 1, v1::SUCCEEDED, "done").ok());
  ASSERT_TRUE(store_
                  ->SaveTimeline([] {
                    v1::Timeline timeline;
                    timeline.set_job_id("job-1");
                    timeline.set_attempt(1);
                    timeline.add_ranks()->set_rank(0);
                    return timeline;
                  }())
                  .ok());
  clock.Advance(absl::Hours(24 * 29));
  EXPECT_EQ(*manager_->Compact(absl::Hours(24 * 30)), 0);
  clock.Advance(absl::Hours(48));
  EXPECT_EQ(*manager_->Compact(absl::Hours(24 * 30)), 1);  // job-2 never ended
  auto job = manager_->Get("job-1");
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->compacted());
  EXPECT_EQ(job->state(), v1::SUCCEEDED);
  EXPECT_EQ(job->submitter(), "alice");
  EXPECT_EQ(job->spec().name(), "mlp");  // its name alone, as its summary's
  EXPECT_EQ(job->spec().world_size(), 0);
  EXPECT_EQ(job->events_size(), 0);
  EXPECT_EQ(store_->LoadTimeline("job-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(manager_->List({}, "", 10)->jobs[0].compacted());
  EXPECT_EQ(manager_->Get("job-2")->state(), v1::PENDING);
}

TEST_F(JobManagerTest, JobsEndedLongerAgoThanForgetAfterAreForgottenButTheNewest) {
  SimulatedClock clock;
  auto manager = JobManager::Create(store_.get(), {.clock = &clock});
  ASSERT_TRUE(manager.ok());
  manager_ = std::move(*manager);
  ASSERT_TRUE(manager_->Submit(Spec(1), {}, "alice", "request-1").ok());
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Submit(Spec(1)).ok());
  ASSERT_TRUE(manager_->Cancel("job-1", "not wanted").ok());
  ASSERT_TRUE(manager_->Cancel("job-3", "not wanted").ok());
  v1::Timeline timeline;
  timeline.set_job_id("job-1");
  ASSERT_TRUE(store_->SaveTimeline(timeline).ok());
  clock.Advance(absl::Hours(23));
  EXPECT_EQ(*manager_->Forget(absl::Hours(24)), 0);
  clock.Advance(absl::Hours(2));
  // job-2 is live; job-3, the newest, is what numbering continues from.
  EXPECT_EQ(*manager_->Forget(absl::Hours(24)), 1);
  const absl::Status gone = manager_->Get("job-1").status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(gone.message().find("was forgotten"), std::string::npos) << gone;
  const absl::Status never = manager_->Get("job-9").status();
  EXPECT_EQ(never.message().find("forgotten"), std::string::npos) << never;
  EXPECT_EQ(store_->LoadJob("job-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->LoadTimeline("job-1").status().code(), absl::StatusCode::kNotFound);
  auto page = manager_->List({}, "", 10);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 2u);
  EXPECT_EQ(page->jobs[0].id(), "job-2");

  ASSERT_TRUE(manager_->Cancel("job-2", "not wanted").ok());
  clock.Advance(absl::Hours(25));
  EXPECT_EQ(*manager_->Forget(absl::Hours(24)), 1);
  // After a restart the forgotten ids are neither found nor given again, and the request
  // id went with its job.
  manager_.reset();
  manager = JobManager::Create(store_.get(), {.clock = &clock});
  ASSERT_TRUE(manager.ok());
  manager_ = std::move(*manager);
  const absl::Status gone_after_restart = manager_->Get("job-2").status();
  EXPECT_NE(gone_after_restart.message().find("was forgotten"), std::string::npos)
      << gone_after_restart;
  auto again = manager_->Submit(Spec(1), {}, "alice", "request-1");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->id(), "job-4");
}

}  // namespace
}  // namespace shardwise
