#include "server/state_store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "server/job_record_bound.h"

namespace shardwise {
namespace {

std::string TempPath(const std::string& name) { return testing::ScratchPath(name); }

v1::Job MakeJob(const std::string& id, v1::JobState state) {
  v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.set_reason("because");
  job.set_attempt(2);
  job.set_create_time_ms(1000);
  job.set_update_time_ms(2000);
  job.mutable_spec()->set_world_size(4);
  auto* rank = job.add_ranks();
  rank->set_rank(0);
  rank->set_worker_id("w0");
  return job;
}

TEST(StateStore, SavedJobsAndEventsSurviveReopening) {
  const std::string path = TempPath("reopen.db");
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    v1::JobEvent event;
    event.set_time_ms(2000);
    event.set_attempt(2);
    event.set_state(v1::RUNNING);
    event.set_message("running");
    ASSERT_TRUE((*store)->SaveJob(MakeJob("job-1", v1::RUNNING), {event}).ok());
    ASSERT_TRUE((*store)->SaveJob(MakeJob("job-2", v1::PENDING)).ok());
    // An update replaces the row and appends the event.
    v1::Job done = MakeJob("job-1", v1::FAILED);
    done.set_reason("rank 1 lost");
    event.set_state(v1::FAILED);
    event.set_message("rank 1 lost");
    ASSERT_TRUE((*store)->SaveJob(done, {event}).ok());
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->LoadJobs();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // The job that ended comes back as its summary; the live one whole.
  ASSERT_EQ(loaded->ended.size(), 1u);
  EXPECT_EQ(loaded->ended[0].id(), "job-1");
  EXPECT_EQ(loaded->ended[0].state(), v1::FAILED);
  EXPECT_EQ(loaded->ended[0].world_size(), 4);
  ASSERT_EQ(loaded->live.size(), 1u);
  EXPECT_EQ(loaded->live[0].id(), "job-2");
  EXPECT_EQ(loaded->live[0].spec().world_size(), 4);
  EXPECT_EQ(loaded->live[0].events_size(), 0);

  auto job = (*store)->LoadJob("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::FAILED);
  EXPECT_EQ(job->reason(), "rank 1 lost");
  EXPECT_EQ(job->spec().world_size(), 4);
  EXPECT_EQ(job->ranks(0).worker_id(), "w0");
  ASSERT_EQ(job->events_size(), 2);
  EXPECT_EQ(job->events(0).state(), v1::RUNNING);
  EXPECT_EQ(job->events(1).message(), "rank 1 lost");
  EXPECT_EQ((*store)->LoadJob("job-3").status().code(), absl::StatusCode::kNotFound);
}

// The file keeps every event; a record read back carries the first and the newest
// (server/job_record_bound.h) and counts the rest, a live job's as an ended one's.
TEST(StateStore, AJobReadBackCarriesItsFirstAndNewestEventsAndCountsTheRest) {
  const std::string path = TempPath("events.db");
  const int total = kFirstJobEventsKept + 3 * kNewestJobEventsKept + 7;
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<v1::JobEvent> events(total);
    for (int i = 0; i < total; ++i) events[i].set_message(std::to_string(i));
    v1::Job live = MakeJob("job-1", v1::RUNNING);
    live.set_events_omitted(5);  // what this record said is not the file's
    ASSERT_TRUE((*store)->SaveJob(live, events).ok());
    ASSERT_TRUE((*store)->SaveJob(MakeJob("job-2", v1::FAILED), events).ok());
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->LoadJobs();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->live.size(), 1u);
  auto ended = (*store)->LoadJob("job-2");
  ASSERT_TRUE(ended.ok()) << ended.status();
  for (const v1::Job& job : {loaded->live[0], *ended}) {
    ASSERT_EQ(job.events_size(), kFirstJobEventsKept + kNewestJobEventsKept) << job.id();
    EXPECT_EQ(job.events_omitted(), total - kFirstJobEventsKept - kNewestJobEventsKept);
    EXPECT_EQ(job.events_omitted_after(), kFirstJobEventsKept);
    EXPECT_EQ(job.events(0).message(), "0");
    EXPECT_EQ(job.events(kFirstJobEventsKept).message(),
              std::to_string(total - kNewestJobEventsKept));
    EXPECT_EQ(job.events(job.events_size() - 1).message(), std::to_string(total - 1));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* count = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM job_events WHERE job_id='job-1';", -1,
                               &count, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(count), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(count, 0), total);
  sqlite3_finalize(count);
  sqlite3_close(db);
}

TEST(StateStore, QuarantinesSurviveReopeningUntilTheyEnd) {
  const std::string path = TempPath("quarantines.db");
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->SaveQuarantine({"w1", 5000, "rank 1 did not come"}).ok());
    ASSERT_TRUE((*store)->SaveQuarantine({"w2", 3000, "first"}).ok());
    ASSERT_TRUE((*store)->SaveQuarantine({"w2", 9000, "again"}).ok());  // replaces the first
    ASSERT_TRUE((*store)->SaveQuarantine({"w3", 1000, "long over"}).ok());
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto held = (*store)->LoadQuarantines(/*now_ms=*/2000);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->size(), 2u);
  EXPECT_EQ((*held)[0].worker, "w1");
  EXPECT_EQ((*held)[0].until_ms, 5000);
  EXPECT_EQ((*held)[0].reason, "rank 1 did not come");
  EXPECT_EQ((*held)[1].worker, "w2");
  EXPECT_EQ((*held)[1].until_ms, 9000);
  EXPECT_EQ((*held)[1].reason, "again");
  // Ended ones are forgotten as they are found ended.
  auto later = (*store)->LoadQuarantines(/*now_ms=*/6000);
  ASSERT_TRUE(later.ok()) << later.status();
  ASSERT_EQ(later->size(), 1u);
  EXPECT_EQ((*later)[0].worker, "w2");
  // And as the coordinator sees them end, without loading: w2's row goes at 9000.
  ASSERT_TRUE((*store)->ForgetEndedQuarantines(/*now_ms=*/8999).ok());
  EXPECT_EQ((*store)->LoadQuarantines(/*now_ms=*/0)->size(), 1u);
  ASSERT_TRUE((*store)->ForgetEndedQuarantines(/*now_ms=*/9000).ok());
  EXPECT_TRUE((*store)->LoadQuarantines(/*now_ms=*/0)->empty());
}

// A file written by the schema before (the spec inside the record, no summary) is moved
// to this one when opened, every job intact.
TEST(StateStore, MovesAVersion1FileToThisSchema) {
  const std::string path = TempPath("v1.db");
  v1::Job running = MakeJob("job-1", v1::RUNNING);
  running.mutable_spec()->set_name("old");
  v1::Job done = MakeJob("job-2", v1::SUCCEEDED);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const char* schema =
        "CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, reason TEXT NOT NULL, "
        "attempt INTEGER NOT NULL, restarts INTEGER NOT NULL, create_time_ms INTEGER NOT NULL, "
        "update_time_ms INTEGER NOT NULL, record BLOB NOT NULL);"
        "CREATE TABLE attempts (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, ranks TEXT NOT "
        "NULL, state TEXT NOT NULL, reason TEXT NOT NULL, update_time_ms INTEGER NOT NULL, "
        "PRIMARY KEY (job_id, attempt));"
        "CREATE TABLE job_events (job_id TEXT NOT NULL, time_ms INTEGER NOT NULL, attempt "
        "INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL);"
        "INSERT INTO job_events VALUES ('job-1', 5, 1, 'RUNNING', 'running');"
        "PRAGMA user_version=1;";
    ASSERT_EQ(sqlite3_exec(db, schema, nullptr, nullptr, nullptr), SQLITE_OK);
    for (const v1::Job* job : {&running, &done}) {
      sqlite3_stmt* insert = nullptr;
      ASSERT_EQ(sqlite3_prepare_v2(db, "INSERT INTO jobs VALUES (?1, ?2, 'r', 2, 0, 1, 2, ?3);", -1,
                                   &insert, nullptr),
                SQLITE_OK);
      const std::string record = job->SerializeAsString();
      sqlite3_bind_text(insert, 1, job->id().c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(insert, 2, v1::JobState_Name(job->state()).c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_blob(insert, 3, record.data(), static_cast<int>(record.size()),
                        SQLITE_TRANSIENT);
      ASSERT_EQ(sqlite3_step(insert), SQLITE_DONE);
      sqlite3_finalize(insert);
    }
    sqlite3_close(db);
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto loaded = (*store)->LoadJobs();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->live.size(), 1u);
  EXPECT_EQ(loaded->live[0].spec().name(), "old");
  EXPECT_EQ(loaded->live[0].events_size(), 1);
  ASSERT_EQ(loaded->ended.size(), 1u);
  EXPECT_EQ(loaded->ended[0].id(), "job-2");
  EXPECT_EQ(loaded->ended[0].world_size(), 4);
  EXPECT_EQ((*store)->LoadJob("job-2")->spec().world_size(), 4);
}

// Rows matching `sql` (a SELECT COUNT(*)), read as an operator would with the sqlite3 shell.
int64_t CountRows(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_stmt* count = nullptr;
  int64_t rows = -1;
  if (sqlite3_open(path.c_str(), &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql.c_str(), -1, &count, nullptr) == SQLITE_OK &&
      sqlite3_step(count) == SQLITE_ROW) {
    rows = sqlite3_column_int64(count, 0);
  }
  sqlite3_finalize(count);
  sqlite3_close(db);
  return rows;
}

TEST(StateStore, ForgettingAJobDeletesEveryRowOfItButKeepsLiveJobsAndTheOneToKeep) {
  const std::string path = TempPath("forget.db");
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<v1::JobEvent> events(3);
  for (const char* id : {"job-1", "job-3"}) {
    ASSERT_TRUE((*store)->SaveJob(MakeJob(id, v1::FAILED), events).ok());
    v1::Timeline timeline;
    timeline.set_job_id(id);
    ASSERT_TRUE((*store)->SaveTimeline(timeline).ok());
  }
  ASSERT_TRUE((*store)->SaveJob(MakeJob("job-2", v1::RUNNING), events).ok());
  v1::Job recent = MakeJob("job-4", v1::SUCCEEDED);
  recent.set_update_time_ms(5000);
  ASSERT_TRUE((*store)->SaveJob(recent).ok());

  auto forgotten = (*store)->ForgetEndedBefore(3000, "job-3");
  ASSERT_TRUE(forgotten.ok()) << forgotten.status();
  EXPECT_EQ(*forgotten, std::vector<std::string>{"job-1"});
  for (const char* table : {"jobs WHERE id", "job_events WHERE job_id", "attempts WHERE job_id",
                            "timelines WHERE job_id"}) {
    EXPECT_EQ(CountRows(path, absl::StrCat("SELECT COUNT(*) FROM ", table, "='job-1';")), 0)
        << table;
  }
  EXPECT_EQ(CountRows(path, "SELECT COUNT(*) FROM job_events WHERE job_id='job-3';"), 3);
  EXPECT_EQ(CountRows(path, "SELECT COUNT(*) FROM timelines WHERE job_id='job-3';"), 1);
  auto loaded = (*store)->LoadJobs();
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->live.size(), 1u);
  EXPECT_EQ(loaded->live[0].id(), "job-2");
  ASSERT_EQ(loaded->ended.size(), 2u);
  EXPECT_EQ(loaded->ended[0].id(), "job-3");
  EXPECT_EQ(loaded->ended[1].id(), "job-4");
}

TEST(StateStore, UsesWalAndRecordsAttempts) {
  const std::string path = TempPath("wal.db");
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->SaveJob(MakeJob("job-9", v1::SCHEDULED)).ok());
  // Read it back with plain SQLite, as an operator would with the sqlite3 shell.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode;", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(
                db, "SELECT ranks, state FROM attempts WHERE job_id='job-9' AND attempt=2;", -1,
                &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "0=w0");
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)), "SCHEDULED");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

TEST(StateStore, RefusesNewerSchema) {
  const std::string path = TempPath("newer.db");
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto store = StateStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("schema version 99"), std::string::npos);
}

TEST(StateStore, UnopenablePathIsAnError) {
  auto store = StateStore::Open("/nonexistent-dir/for/sure/state.db");
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("/nonexistent-dir/for/sure/state.db"), std::string::npos);
}

// A page of the state file SQLite finds corrupt: loading stops with DATA_LOSS naming what
// was read, never returns the jobs before the page as if they were all.
TEST(StateStore, ACorruptPageIsDataLossNotTheEndOfTheJobs) {
  const std::string path = TempPath("corrupt.db");
  {
    auto store = StateStore::Open(path);
    ASSERT_TRUE(store.ok()) << store.status();
    for (int i = 0; i < 300; ++i) {
      v1::Job job = MakeJob("job-" + std::to_string(i), v1::PENDING);
      job.set_reason(std::string(400, 'r'));  // many pages of jobs
      ASSERT_TRUE((*store)->SaveJob(job).ok());
    }
  }
  // A leaf page of the jobs table, from SQLite's own page map.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT pageno FROM dbstat WHERE name='jobs' AND pagetype='leaf' "
                               "ORDER BY pageno LIMIT 1 OFFSET 5;",
                               -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  const int64_t page = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA page_size;", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  const int64_t page_size = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  const std::string garbage(page_size, '\xab');
  {
    std::FILE* file = std::fopen(path.c_str(), "r+b");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(std::fseek(file, static_cast<long>((page - 1) * page_size), SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(garbage.data(), 1, garbage.size(), file), garbage.size());
    std::fclose(file);
  }
  auto store = StateStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  const auto loaded = (*store)->LoadJobs();
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << loaded.status();
  EXPECT_NE(loaded.status().message().find("loading jobs"), std::string::npos) << loaded.status();
}

}  // namespace
}  // namespace shardwise
