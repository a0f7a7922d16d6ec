#ifndef SHARDWISE_SERVER_RENDEZVOUS_STORE_H_
#define SHARDWISE_SERVER_RENDEZVOUS_STORE_H_

// The key-value store behind the rendezvous service, scoped to one attempt of one job.
// The controller opens a scope when it schedules an attempt and closes it when the
// attempt ends; calls on a scope that is not open fail with FAILED_PRECONDITION, and a
// Wait blocked on a scope that closes returns ABORTED. Keys live in memory only: an
// attempt does not outlive the coordinator (see JobManager's recovery).
//
// Thread-safety: all methods may be called from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardwise {

class RendezvousStore {
 public:
  struct Limits {
    size_t max_key_bytes = 1024;
    size_t max_value_bytes = 4 << 20;
    size_t max_keys_per_scope = 1 << 16;
  };

  RendezvousStore() : RendezvousStore(Limits()) {}
  explicit RendezvousStore(const Limits& limits) : limits_(limits) {}

  void OpenScope(const std::string& job_id, int32_t attempt);
  void CloseScope(const std::string& job_id, int32_t attempt);

  absl::Status Set(const std::string& job_id, int32_t attempt, const std::string& key,
                   const std::string& value);
  // NOT_FOUND if the key is not set.
  absl::StatusOr<std::string> Get(const std::string& job_id, int32_t attempt,
                                  const std::string& key) const;
  // OK once every key is set; DEADLINE_EXCEEDED after `timeout`; ABORTED if the scope
  // closes meanwhile.
  absl::Status Wait(const std::string& job_id, int32_t attempt,
                    const std::vector<std::string>& keys, absl::Duration timeout) const;
  // Treats the value as a decimal counter (unset: 0) and adds `delta`.
  absl::StatusOr<int64_t> Add(const std::string& job_id, int32_t attempt,
                              const std::string& key, int64_t delta);

 private:
  using Scope = absl::flat_hash_map<std::string, std::string>;
  static std::string ScopeName(const std::string& job_id, int32_t attempt);
  absl::StatusOr<const Scope*> FindScope(const std::string& job_id, int32_t attempt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckWrite(const Scope& scope, const std::string& key, size_t value_size) const;

  const Limits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Scope> scopes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_RENDEZVOUS_STORE_H_
