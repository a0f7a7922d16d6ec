#include "server/state_store.h"

#include <sqlite3.h>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace shardwise {
namespace {

absl::Status SqliteError(sqlite3* db, const std::string& what) {
  return absl::InternalError(absl::StrCat("state store: ", what, ": ", sqlite3_errmsg(db)));
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

  absl::Status Run(const std::string& what) {
    if (!ok_ || sqlite3_step(stmt_) != SQLITE_DONE) return SqliteError(db_, what);
    return absl::OkStatus();
  }
  std::string ColumnBlob(int i) {
    return std::string(static_cast<const char*>(sqlite3_column_blob(stmt_, i)),
                       sqlite3_column_bytes(stmt_, i));
  }
  std::string ColumnText(int i) {
    const unsigned char* text = sqlite3_column_text(stmt_, i);
    return text == nullptr ? "" : reinterpret_cast<const char*>(text);
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
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
  record BLOB NOT NULL
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
)sql";

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> StateStore::Open(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                             SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    absl::Status status = absl::FailedPreconditionError(absl::StrCat(
        "state store: cannot open '", path, "': ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return status;
  }
  std::unique_ptr<StateStore> store(new StateStore(db));
  absl::MutexLock lock(&store->mu_);
  // A killed coordinator loses nothing it committed: WAL with a sync on every commit.
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  sqlite3_busy_timeout(db, 5000);

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
  RETURN_IF_ERROR(store->Exec(kSchema));
  RETURN_IF_ERROR(store->Exec(absl::StrCat("PRAGMA user_version=", kSchemaVersion, ";")));
  return store;
}

StateStore::~StateStore() { sqlite3_close(db_); }

absl::Status StateStore::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    absl::Status status = absl::InternalError(absl::StrCat("state store: ", error));
    sqlite3_free(error);
    return status;
  }
  return absl::OkStatus();
}

absl::Status StateStore::SaveJob(const v1::Job& job, const std::vector<v1::JobEvent>& new_events) {
  v1::Job record = job;
  record.clear_events();
  const std::string state = v1::JobState_Name(job.state());

  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  auto write = [&]() -> absl::Status {
    Statement upsert(db_,
                     "INSERT INTO jobs (id, state, reason, attempt, restarts, create_time_ms, "
                     "update_time_ms, record) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
                     "ON CONFLICT (id) DO UPDATE SET state=?2, reason=?3, attempt=?4, "
                     "restarts=?5, update_time_ms=?7, record=?8;");
    upsert.BindText(1, job.id());
    upsert.BindText(2, state);
    upsert.BindText(3, job.reason());
    upsert.BindInt(4, job.attempt());
    upsert.BindInt(5, job.restarts());
    upsert.BindInt(6, job.create_time_ms());
    upsert.BindInt(7, job.update_time_ms());
    upsert.BindBlob(8, record.SerializeAsString());
    RETURN_IF_ERROR(upsert.Run(absl::StrCat("saving job ", job.id())));

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
      RETURN_IF_ERROR(attempt.Run(absl::StrCat("saving attempt ", job.attempt(), " of ", job.id())));
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
  };
  absl::Status status = write();
  if (!status.ok()) {
    (void)Exec("ROLLBACK;");
    return status;
  }
  return Exec("COMMIT;");
}

absl::StatusOr<std::vector<v1::Job>> StateStore::LoadJobs() {
  absl::MutexLock lock(&mu_);
  std::vector<v1::Job> jobs;
  absl::flat_hash_map<std::string, size_t> index;
  Statement select(db_, "SELECT id, record FROM jobs ORDER BY create_time_ms, rowid;");
  if (!select.ok()) return SqliteError(db_, "loading jobs");
  while (sqlite3_step(select.get()) == SQLITE_ROW) {
    v1::Job job;
    if (!job.ParseFromString(select.ColumnBlob(1))) {
      return absl::DataLossError(
          absl::StrCat("state store: the record of job ", select.ColumnText(0), " is corrupt"));
    }
    index[job.id()] = jobs.size();
    jobs.push_back(std::move(job));
  }
  Statement events(db_,
                   "SELECT job_id, time_ms, attempt, state, message FROM job_events "
                   "ORDER BY rowid;");
  if (!events.ok()) return SqliteError(db_, "loading job events");
  while (sqlite3_step(events.get()) == SQLITE_ROW) {
    auto it = index.find(events.ColumnText(0));
    if (it == index.end()) continue;
    v1::JobEvent* event = jobs[it->second].add_events();
    event->set_time_ms(sqlite3_column_int64(events.get(), 1));
    event->set_attempt(static_cast<int32_t>(sqlite3_column_int64(events.get(), 2)));
    v1::JobState state;
    event->set_state(v1::JobState_Parse(events.ColumnText(3), &state) ? state
                                                                      : v1::JOB_STATE_UNSPECIFIED);
    event->set_message(events.ColumnText(4));
  }
  return jobs;
}

}  // namespace shardwise
