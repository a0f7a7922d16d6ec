#include "server/state_store.h"

#include <sqlite3.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "contracts/job_state.h"
#include "contracts/job_summary.h"
#include "server/job_record_bound.h"

namespace shardwise {
namespace {

// A file SQLite finds corrupt is DATA_LOSS (an operator restores it from a backup);
// anything else (a full disk, an I/O error) INTERNAL.
absl::Status SqliteStatus(int code, const std::string& message) {
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) return absl::DataLossError(message);
  return absl::InternalError(message);
}

absl::Status SqliteError(sqlite3* db, const std::string& what) {
  return SqliteStatus(sqlite3_errcode(db),
                      absl::StrCat("state store: ", what, ": ", sqlite3_errmsg(db)));
}

// A prepared statement, finalised when it goes out of scope.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    ok_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) == SQLITE_OK;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  bool ok() const { return ok_; }
  sqlite3_stmt* get() { return stmt_; }

  void BindText(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, const std::string& v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void BindInt(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }

  // Steps to the next row: false at the end of the rows or on an error, which Finished
  // then reports (a corrupt page or a failed read is not the end of the data).
  bool NextRow() {
    last_step_ = sqlite3_step(stmt_);
    return last_step_ == SQLITE_ROW;
  }
  absl::Status Finished(const std::string& what) {
    return last_step_ == SQLITE_DONE ? absl::OkStatus() : SqliteError(db_, what);
  }

  absl::Status Run(const std::string& what) {
    if (!ok_ || sqlite3_step(stmt_) != SQLITE_DONE) return SqliteError(db_, what);
    return absl::OkStatus();
  }
  std::string ColumnBlob(int i) {
    const void* blob = sqlite3_column_blob(stmt_, i);
    if (blob == nullptr) return "";  // NULL, or empty
    return std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, i));
  }
  std::string ColumnText(int i) {
    const unsigned char* text = sqlite3_column_text(stmt_, i);
    return text == nullptr ? "" : reinterpret_cast<const char*>(text);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
  int last_step_ = SQLITE_DONE;
};

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS jobs (
  id TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  restarts INTEGER NOT NULL,
  create_time_ms INTEGER NOT NULL,
  update_time_ms INTEGER NOT NULL,
  record BLOB NOT NULL,
  spec BLOB,
  summary BLOB
);
CREATE TABLE IF NOT EXISTS attempts (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  ranks TEXT NOT NULL,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  update_time_ms INTEGER NOT NULL,
  PRIMARY KEY (job_id, attempt)
);
CREATE TABLE IF NOT EXISTS job_events (
  job_id TEXT NOT NULL,
  time_ms INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  state TEXT NOT NULL,
  message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS job_events_by_job ON job_events (job_id);
CREATE TABLE IF NOT EXISTS timelines (
  job_id TEXT PRIMARY KEY,
  attempt INTEGER NOT NULL,
  record BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS quarantines (
  worker TEXT PRIMARY KEY,
  until_ms INTEGER NOT NULL,
  reason TEXT NOT NULL
);
)sql";

bool IsTerminalName(const std::string& state) {
  v1::JobState parsed;
  return v1::JobState_Parse(state, &parsed) && IsTerminal(parsed);
}

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    absl::Status status = absl::FailedPreconditionError(absl::StrCat(
        "state store: cannot open '", path, "': ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return status;
  }
  std::unique_ptr<StateStore> store(new StateStore(db));
  absl::MutexLock lock(&store->mu_);
  // First: a reader holding the file (an operator's sqlite3 shell) is waited for, not
  // taken for a locked file at once.
  sqlite3_busy_timeout(db, 5000);
  // A killed coordinator loses nothing it committed: WAL with a sync on every commit.
  RETURN_IF_ERROR(store->UseWriteAheadLog());
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL;"));

  Statement version(db, "PRAGMA user_version;");
  if (!version.ok() || sqlite3_step(version.get()) != SQLITE_ROW) {
    return SqliteError(db, absl::StrCat("reading the schema version of '", path, "'"));
  }
  const int64_t found = sqlite3_column_int64(version.get(), 0);
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state store '", path, "' has schema version ", found, "; this coordinator knows ",
        kSchemaVersion, ". Run the newer coordinator, or point --state_file elsewhere."));
  }
  if (found == 1) RETURN_IF_ERROR(store->MigrateFromVersion1());
  RETURN_IF_ERROR(store->Exec(kSchema));
  RETURN_IF_ERROR(store->Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion, ";")));
  return store;
}

StateStore::~StateStore() { sqlite3_close(db_); }

absl::Status StateStore::UseWriteAheadLog() {
  // SQLite answers with the mode it is in, which is not WAL where the file's filesystem
  // cannot hold one (its shared memory): a rollback journal would be used in silence.
  Statement mode(db_, "PRAGMA journal_mode=WAL;");
  if (!mode.ok() || !mode.NextRow()) return SqliteError(db_, "setting the journal mode");
  const std::string got = mode.ColumnText(0);
  if (!absl::EqualsIgnoreCase(got, "wal")) {
    return absl::FailedPreconditionError(
        absl::StrCat("state store: SQLite keeps its journal in mode '", got,
                     "', not WAL, on this filesystem: put --state_file on a local filesystem"));
  }
  return absl::OkStatus();
}

absl::Status StateStore::Exec(const std::string& sql) {
  char* error = nullptr;
  if (const int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
      code != SQLITE_OK) {
    absl::Status status =
        SqliteStatus(code, absl::StrCat("state store: ", error != nullptr ? error : ""));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

template <typename Write>
absl::Status StateStore::InTransaction(Write write) {
  const absl::Time started = Clock::Real().Now();
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  absl::Status status = write();
  if (!status.ok()) {
    (void)Exec("ROLLBACK;");
    return status;
  }
  status = Exec("COMMIT;");
  if (!status.ok()) {
    // A commit that failed (SQLITE_BUSY, a full disk) may leave the transaction open:
    // every later BEGIN would fail, and a write outside a transaction would sit in it.
    (void)Exec("ROLLBACK;");
    return status;
  }
  if (commit_histogram_ != nullptr)
    commit_histogram_->ObserveDuration(Clock::Real().Now() - started);
  return status;
}

// Version 1 kept the spec inside the record and no summary: both move out, in one
// transaction (a crash halfway leaves the file at version 1, to be moved again).
absl::Status StateStore::MigrateFromVersion1() {
  return InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(
        Exec("ALTER TABLE jobs ADD COLUMN spec BLOB; "
             "ALTER TABLE jobs ADD COLUMN summary BLOB;"));
    std::vector<v1::Job> jobs;
    {
      Statement select(db_, "SELECT id, record FROM jobs;");
      if (!select.ok()) return SqliteError(db_, "reading jobs to migrate");
      while (select.NextRow()) {
        v1::Job job;
        if (!job.ParseFromString(select.ColumnBlob(1))) {
          return absl::DataLossError(
              absl::StrCat("state store: the record of job ", select.ColumnText(0), " is corrupt"));
        }
        jobs.push_back(std::move(job));
      }
      RETURN_IF_ERROR(select.Finished("reading jobs to migrate"));
    }
    for (const v1::Job& job : jobs) {
      v1::Job record = job;
      record.clear_spec();
      // Its name alone, which `describe` shows as `get jobs` does (the summary keeps it).
      if (!job.spec().name().empty()) record.mutable_spec()->set_name(job.spec().name());
      Statement update(db_, "UPDATE jobs SET record=?2, spec=?3, summary=?4 WHERE id=?1;");
      update.BindText(1, job.id());
      update.BindBlob(2, record.SerializeAsString());
      update.BindBlob(3, job.spec().SerializeAsString());
      update.BindBlob(4, Summarize(job).SerializeAsString());
      RETURN_IF_ERROR(update.Run(absl::StrCat("migrating job ", job.id())));
    }
    return Exec(absl::StrCat(kSchema, "PRAGMA user_version=2;"));
  });
}

absl::Status StateStore::WriteJobRow(const v1::Job& job) {
  v1::Job record = job;
  record.clear_events();  // in job_events, each once (the count of omitted ones with them)
  record.clear_events_omitted();
  record.clear_events_omitted_after();
  record.clear_spec();
  const std::string state = v1::JobState_Name(job.state());
  Statement upsert(db_,
                   "INSERT INTO jobs (id, state, reason, attempt, restarts, create_time_ms, "
                   "update_time_ms, record, spec, summary) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                   "?8, ?9, ?10) ON CONFLICT (id) DO UPDATE SET state=?2, reason=?3, "
                   "attempt=?4, restarts=?5, update_time_ms=?7, record=?8, summary=?10;");
  upsert.BindText(1, job.id());
  upsert.BindText(2, state);
  upsert.BindText(3, job.reason());
  upsert.BindInt(4, job.attempt());
  upsert.BindInt(5, job.restarts());
  upsert.BindInt(6, job.create_time_ms());
  upsert.BindInt(7, job.update_time_ms());
  upsert.BindBlob(8, record.SerializeAsString());
  upsert.BindBlob(9, job.spec().SerializeAsString());
  upsert.BindBlob(10, Summarize(job).SerializeAsString());
  return upsert.Run(absl::StrCat("saving job ", job.id()));
}

absl::Status StateStore::SaveJob(const v1::Job& job, const std::vector<v1::JobEvent>& new_events) {
  const std::string state = v1::JobState_Name(job.state());
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    RETURN_IF_ERROR(WriteJobRow(job));
    if (job.attempt() > 0) {
      std::vector<std::string> ranks;
      for (const auto& r : job.ranks()) ranks.push_back(absl::StrCat(r.rank(), "=", r.worker_id()));
      Statement attempt(db_,
                        "INSERT INTO attempts (job_id, attempt, ranks, state, reason, "
                        "update_time_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT "
                        "(job_id, attempt) DO UPDATE SET ranks=?3, state=?4, reason=?5, "
                        "update_time_ms=?6;");
      attempt.BindText(1, job.id());
      attempt.BindInt(2, job.attempt());
      attempt.BindText(3, absl::StrJoin(ranks, ","));
      attempt.BindText(4, state);
      attempt.BindText(5, job.reason());
      attempt.BindInt(6, job.update_time_ms());
      RETURN_IF_ERROR(
          attempt.Run(absl::StrCat("saving attempt ", job.attempt(), " of ", job.id())));
    }
    for (const v1::JobEvent& new_event : new_events) {
      Statement event(db_,
                      "INSERT INTO job_events (job_id, time_ms, attempt, state, message) "
                      "VALUES (?1, ?2, ?3, ?4, ?5);");
      event.BindText(1, job.id());
      event.BindInt(2, new_event.time_ms());
      event.BindInt(3, new_event.attempt());
      event.BindText(4, v1::JobState_Name(new_event.state()));
      event.BindText(5, new_event.message());
      RETURN_IF_ERROR(event.Run(absl::StrCat("saving an event of ", job.id())));
    }
    return absl::OkStatus();
  });
}

absl::Status StateStore::SaveJobs(const std::vector<v1::Job>& jobs) {
  if (jobs.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return InTransaction([&]() -> absl::Status {
    for (const v1::Job& job : jobs) RETURN_IF_ERROR(WriteJobRow(job));
    return absl::OkStatus();
  });
}

absl::Status StateStore::LoadEvents(const std::string& job_id, v1::Job* job) {
  Statement events(db_,
                   "SELECT time_ms, attempt, state, message FROM job_events WHERE job_id=?1 "
                   "ORDER BY rowid;");
  if (!events.ok()) return SqliteError(db_, "loading job events");
  events.BindText(1, job_id);
  // Every event is here: the record's count of those it left out starts again.
  job->clear_events();
  job->clear_events_omitted();
  job->clear_events_omitted_after();
  while (events.NextRow()) {
    // Bounded as they come (in batches), not after all of a long history is held.
    if (job->events_size() >= kFirstJobEventsKept + 2 * kNewestJobEventsKept) BoundJobEvents(job);
    v1::JobEvent* event = job->add_events();
    event->set_time_ms(sqlite3_column_int64(events.get(), 0));
    event->set_attempt(static_cast<int32_t>(sqlite3_column_int64(events.get(), 1)));
    v1::JobState state;
    event->set_state(v1::JobState_Parse(events.ColumnText(2), &state) ? state
                                                                      : v1::JOB_STATE_UNSPECIFIED);
    event->set_message(events.ColumnText(3));
  }
  BoundJobEvents(job);
  return events.Finished(absl::StrCat("loading the events of job ", job_id));
}

namespace {

// The job from its row's record and spec (NULL once compacted).
absl::StatusOr<v1::Job> ParseJobRow(Statement& row, int id_column, int record_column,
                                    int spec_column) {
  v1::Job job;
  if (!job.ParseFromString(row.ColumnBlob(record_column))) {
    return absl::DataLossError(
        absl::StrCat("state store: the record of job ", row.ColumnText(id_column), " is corrupt"));
  }
  if (sqlite3_column_type(row.get(), spec_column) != SQLITE_NULL &&
      !job.mutable_spec()->ParseFromString(row.ColumnBlob(spec_column))) {
    return absl::DataLossError(
        absl::StrCat("state store: the spec of job ", row.ColumnText(id_column), " is corrupt"));
  }
  return job;
}

}  // namespace

absl::StatusOr<StateStore::Loaded> StateStore::LoadJobs() {
  absl::MutexLock lock(&mu_);
  Loaded loaded;
  Statement select(db_,
                   "SELECT id, state, record, spec, summary FROM jobs "
                   "ORDER BY create_time_ms, rowid;");
  if (!select.ok()) return SqliteError(db_, "loading jobs");
  while (select.NextRow()) {
    if (IsTerminalName(select.ColumnText(1))) {
      v1::JobSummary summary;
      if (!summary.ParseFromString(select.ColumnBlob(4))) {
        return absl::DataLossError(
            absl::StrCat("state store: the summary of job ", select.ColumnText(0), " is corrupt"));
      }
      loaded.ended.push_back(std::move(summary));
      continue;
    }
    ASSIGN_OR_RETURN(v1::Job job, ParseJobRow(select, 0, 2, 3));
    loaded.live.push_back(std::move(job));
  }
  RETURN_IF_ERROR(select.Finished("loading jobs"));
  for (v1::Job& job : loaded.live) RETURN_IF_ERROR(LoadEvents(job.id(), &job));
  return loaded;
}

absl::StatusOr<v1::Job> StateStore::LoadJob(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Statement select(db_, "SELECT id, record, spec FROM jobs WHERE id=?1;");
  if (!select.ok()) return SqliteError(db_, "loading a job");
  select.BindText(1, job_id);
  if (!select.NextRow()) {
    RETURN_IF_ERROR(select.Finished(absl::StrCat("loading job ", job_id)));
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  ASSIGN_OR_RETURN(v1::Job job, ParseJobRow(select, 0, 1, 2));
  RETURN_IF_ERROR(LoadEvents(job_id, &job));
  return job;
}

absl::Status StateStore::SaveTimeline(const v1::Timeline& timeline) {
  absl::MutexLock lock(&mu_);
  Statement upsert(db_,
                   "INSERT INTO timelines (job_id, attempt, record) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (job_id) DO UPDATE SET attempt=?2, record=?3;");
  upsert.BindText(1, timeline.job_id());
  upsert.BindInt(2, timeline.attempt());
  upsert.BindBlob(3, timeline.SerializeAsString());
  return upsert.Run(absl::StrCat("saving the timeline of ", timeline.job_id()));
}

absl::StatusOr<v1::Timeline> StateStore::LoadTimeline(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  Statement select(db_, "SELECT record FROM timelines WHERE job_id=?1;");
  if (!select.ok()) return SqliteError(db_, "loading a timeline");
  select.BindText(1, job_id);
  if (!select.NextRow()) {
    RETURN_IF_ERROR(select.Finished(absl::StrCat("loading the timeline of job ", job_id)));
    return absl::NotFoundError(absl::StrCat("no timeline of job '", job_id, "' is stored"));
  }
  v1::Timeline timeline;
  if (!timeline.ParseFromString(select.ColumnBlob(0))) {
    return absl::DataLossError(
        absl::StrCat("state store: the timeline of ", job_id, " is corrupt"));
  }
  return timeline;
}

absl::Status StateStore::SaveQuarantine(const StoredQuarantine& quarantine) {
  absl::MutexLock lock(&mu_);
  Statement upsert(db_,
                   "INSERT INTO quarantines (worker, until_ms, reason) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT (worker) DO UPDATE SET until_ms=?2, reason=?3;");
  upsert.BindText(1, quarantine.worker);
  upsert.BindInt(2, quarantine.until_ms);
  upsert.BindText(3, quarantine.reason);
  return upsert.Run(absl::StrCat("saving the quarantine of worker ", quarantine.worker));
}

absl::Status StateStore::ForgetEndedQuarantines(int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  return ForgetEndedQuarantinesLocked(now_ms);
}

absl::Status StateStore::ForgetEndedQuarantinesLocked(int64_t now_ms) {
  Statement ended(db_, "DELETE FROM quarantines WHERE until_ms <= ?1;");
  ended.BindInt(1, now_ms);
  return ended.Run("forgetting ended quarantines");
}

absl::StatusOr<std::vector<StoredQuarantine>> StateStore::LoadQuarantines(int64_t now_ms) {
  absl::MutexLock lock(&mu_);
  // The ended ones are only tidied: a file that refuses writes (a full disk) still
  // yields the quarantines in force, which are read past the ended rows.
  (void)ForgetEndedQuarantinesLocked(now_ms);
  Statement select(db_,
                   "SELECT worker, until_ms, reason FROM quarantines WHERE until_ms > ?1 ORDER "
                   "BY worker;");
  if (!select.ok()) return SqliteError(db_, "loading quarantines");
  select.BindInt(1, now_ms);
  std::vector<StoredQuarantine> quarantines;
  while (select.NextRow()) {
    quarantines.push_back(
        {select.ColumnText(0), sqlite3_column_int64(select.get(), 1), select.ColumnText(2)});
  }
  RETURN_IF_ERROR(select.Finished("loading quarantines"));
  return quarantines;
}

absl::StatusOr<std::vector<std::string>> StateStore::CompactEndedBefore(int64_t cutoff_ms) {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> ended;
  {
    Statement select(db_,
                     "SELECT id, record, spec, state FROM jobs WHERE update_time_ms < ?1 AND "
                     "spec IS NOT NULL;");
    if (!select.ok()) return SqliteError(db_, "finding jobs to compact");
    select.BindInt(1, cutoff_ms);
    while (select.NextRow()) {
      if (!IsTerminalName(select.ColumnText(3))) continue;
      ASSIGN_OR_RETURN(v1::Job job, ParseJobRow(select, 0, 1, 2));
      ended.push_back(std::move(job));
    }
    RETURN_IF_ERROR(select.Finished("finding jobs to compact"));
  }
  std::vector<std::string> ids;
  RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    for (const v1::Job& job : ended) {
      v1::Job record = job;
      record.clear_spec();
      // Its name alone, which `describe` shows as `get jobs` does (the summary keeps it).
      if (!job.spec().name().empty()) record.mutable_spec()->set_name(job.spec().name());
      record.clear_hook_switches();
      record.clear_execution_order();
      record.clear_prefetch_plan();
      record.clear_ranks();
      record.set_compacted(true);
      v1::JobSummary summary = Summarize(job);
      summary.set_compacted(true);
      Statement update(db_, "UPDATE jobs SET record=?2, spec=NULL, summary=?3 WHERE id=?1;");
      update.BindText(1, job.id());
      update.BindBlob(2, record.SerializeAsString());
      update.BindBlob(3, summary.SerializeAsString());
      RETURN_IF_ERROR(update.Run(absl::StrCat("compacting job ", job.id())));
      RETURN_IF_ERROR(DeleteHistory(job.id(), "compacting"));
      ids.push_back(job.id());
    }
    return absl::OkStatus();
  }));
  return ids;
}

absl::Status StateStore::DeleteHistory(const std::string& job_id, const std::string& why) {
  for (const char* table : {"job_events", "attempts", "timelines"}) {
    Statement remove(db_, absl::StrCat("DELETE FROM ", table, " WHERE job_id=?1;").c_str());
    remove.BindText(1, job_id);
    RETURN_IF_ERROR(remove.Run(absl::StrCat(why, " job ", job_id)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> StateStore::ForgetEndedBefore(int64_t cutoff_ms,
                                                                       const std::string& keep) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  {
    Statement select(db_, "SELECT id, state FROM jobs WHERE update_time_ms < ?1 AND id != ?2;");
    if (!select.ok()) return SqliteError(db_, "finding jobs to forget");
    select.BindInt(1, cutoff_ms);
    select.BindText(2, keep);
    while (select.NextRow()) {
      if (IsTerminalName(select.ColumnText(1))) ids.push_back(select.ColumnText(0));
    }
    RETURN_IF_ERROR(select.Finished("finding jobs to forget"));
  }
  RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    for (const std::string& id : ids) {
      Statement remove(db_, "DELETE FROM jobs WHERE id=?1;");
      remove.BindText(1, id);
      RETURN_IF_ERROR(remove.Run(absl::StrCat("forgetting job ", id)));
      RETURN_IF_ERROR(DeleteHistory(id, "forgetting"));
    }
    return absl::OkStatus();
  }));
  return ids;
}

}  // namespace shardwise
