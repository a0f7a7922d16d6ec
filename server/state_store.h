#ifndef SHARDWISE_SERVER_STATE_STORE_H_
#define SHARDWISE_SERVER_STATE_STORE_H_

// The coordinator's durable state: jobs, their attempts and their events, in one SQLite
// file in WAL mode. Every change is one transaction committed before the caller goes on,
// so a coordinator killed at any point restarts with every job it had acknowledged.
//
// Thread-safety: all methods may be called from any thread; calls are serialised.

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/job.pb.h"

struct sqlite3;

namespace shardwise {

class StateStore {
 public:
  // Opens (creating if needed) the database at `path`. FAILED_PRECONDITION if the file was
  // written by a newer Shardwise whose schema this one does not know.
  static absl::StatusOr<std::unique_ptr<StateStore>> Open(const std::string& path);

  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Writes the job (its events are not part of the row), its current attempt, and
  // `new_events`, in one transaction: all of it or none.
  absl::Status SaveJob(const v1::Job& job, const std::vector<v1::JobEvent>& new_events = {});

  // Every job, oldest first, with its events.
  absl::StatusOr<std::vector<v1::Job>> LoadJobs();

  static constexpr int kSchemaVersion = 1;

 private:
  explicit StateStore(sqlite3* db) : db_(db) {}
  absl::Status Exec(const std::string& sql) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  sqlite3* const db_;  // owned; closed in the destructor
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_STATE_STORE_H_
