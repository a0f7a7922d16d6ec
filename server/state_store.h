#ifndef SHARDWISE_SERVER_STATE_STORE_H_
#define SHARDWISE_SERVER_STATE_STORE_H_

// The coordinator's durable state: jobs, their attempts, their events and the timelines
// of jobs that ended, in one SQLite file in WAL mode. Every change is one transaction
// committed before the caller goes on, so a coordinator killed at any point restarts with
// every job it had acknowledged.
//
// A job's row keeps its spec apart from the rest of its record (the spec never changes,
// and progress rewrites the rest every second) and a summary beside them, so that a
// coordinator holds only summaries of the jobs that ended and reads the rest on request.
//
// Thread-safety: all methods may be called from any thread; calls are serialised.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "proto/job.pb.h"

struct sqlite3;

namespace shardwise {

// A worker kept out of scheduling until `until_ms` (Unix ms), and why (the rendezvous
// join deadline's quarantine: docs/operations.md).
struct StoredQuarantine {
  std::string worker;
  int64_t until_ms = 0;
  std::string reason;
};

class StateStore {
 public:
  // Opens (creating if needed) the database at `path`, moving a file of an older schema
  // to this one. FAILED_PRECONDITION if the file was written by a newer Shardwise whose
  // schema this one does not know.
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path);

  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Writes the job (its spec only when the row is new: it never changes), its current
  // attempt, and `new_events`, in one transaction: all of it or none.
  absl::Status SaveJob(const v1::Job& job, const std::vector<v1::JobEvent>& new_events = {});
  // Writes several jobs' records (not their specs or events) in one transaction.
  absl::Status SaveJobs(const std::vector<v1::Job>& jobs);

  struct Loaded {
    std::vector<v1::Job> live;          // whole, with their events
    std::vector<v1::JobSummary> ended;  // SUCCEEDED, FAILED or CANCELLED
  };
  // Every job, oldest first: the ones still live whole, the ones that ended as summaries.
  absl::StatusOr<Loaded> LoadJobs();
  // One job, whole, with its events; NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> LoadJob(const std::string& job_id);

  // The timeline of a job that ended (the coordinator keeps only recent ones in memory).
  absl::Status SaveTimeline(const v1::Timeline& timeline);
  // NOT_FOUND when none was saved for the job.
  absl::StatusOr<v1::Timeline> LoadTimeline(const std::string& job_id);

  // Keeps a worker's quarantine (replacing one it had), so that a restart keeps it too.
  absl::Status SaveQuarantine(const StoredQuarantine& quarantine);
  // The quarantines that end after `now_ms`; forgets those that ended.
  absl::StatusOr<std::vector<StoredQuarantine>> LoadQuarantines(int64_t now_ms);
  // Deletes the quarantines that ended at or before `now_ms`.
  absl::Status ForgetEndedQuarantines(int64_t now_ms);

  // Compacts the jobs that ended before `cutoff_ms`: deletes their specs, events,
  // attempts and timelines, keeping their summaries (marked compacted). Returns their ids.
  absl::StatusOr<std::vector<std::string>> CompactEndedBefore(int64_t cutoff_ms);

  // Deletes every trace of the jobs that ended before `cutoff_ms` but `keep` (the newest
  // job: a restarted coordinator numbers new jobs after the highest id it finds, so keeping
  // it is what keeps a forgotten id from being given again). Returns their ids.
  absl::StatusOr<std::vector<std::string>> ForgetEndedBefore(int64_t cutoff_ms,
                                                             const std::string& keep);

  // Where each transaction's duration (BEGIN to COMMIT, fsync included) is recorded;
  // null: nowhere. Set before the store is shared between threads.
  void set_commit_histogram(Histogram* histogram) { commit_histogram_ = histogram; }

  static constexpr int kSchemaVersion = 2;

 private:
  explicit StateStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Journal mode WAL, or FAILED_PRECONDITION where SQLite could not take it.
  absl::Status UseWriteAheadLog() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `write` in a transaction: committed if it succeeds, rolled back otherwise.
  template <typename Write>
  absl::Status InTransaction(Write write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteJobRow(const v1::Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status LoadEvents(const std::string& job_id, v1::Job* job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes a job's events, attempts and timeline (`why`: what the caller is doing, for
  // its error).
  absl::Status DeleteHistory(const std::string& job_id, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MigrateFromVersion1() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ForgetEndedQuarantinesLocked(int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_;  // owned; closed in the destructor
  Histogram* commit_histogram_ = nullptr;
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_STATE_STORE_H_
