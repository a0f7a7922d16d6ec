#ifndef SHARDWISE_SERVER_RENDEZVOUS_STORE_H_
#define SHARDWISE_SERVER_RENDEZVOUS_STORE_H_

// The key-value store behind the rendezvous service, scoped to one attempt of one job.
// The controller opens a scope when it schedules an attempt, with one token per rank (the
// rank's Assignment carries it), and closes it when the attempt ends. Every call names
// its scope and carries a token: calls on a scope that is not open fail with
// FAILED_PRECONDITION, calls without one of its rank tokens with PERMISSION_DENIED (only
// the attempt's ranks may read or write its keys), and a wait on a scope that closes ends
// with ABORTED. Keys live in memory only: an attempt does not outlive the coordinator
// (see JobManager's recovery).
//
// Waits hold no thread: WaitAsync registers a callback that runs once every key is set,
// the scope closes, or the waiter expires or is cancelled. Each key indexes the waits
// still missing it, so a set costs the waits on that key, not every wait of the scope.
//
// Thread-safety: all methods may be called from any thread. Callbacks run without the
// store's lock, on the thread whose call completed the wait.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rendezvous_service.pb.h"

namespace shardwise {

class RendezvousStore {
 public:
  struct Limits {
    size_t max_key_bytes = 1024;
    size_t max_value_bytes = 4 << 20;
    size_t max_keys_per_scope = 1 << 16;
    size_t max_keys_per_wait = 1 << 16;  // and per GetMany
    size_t max_waits_per_scope = 1 << 16;
    size_t max_waits_per_rank = 64;
    // What one GetMany reply may carry (a client takes 4 MiB by default).
    size_t max_reply_bytes = size_t{3} << 20;
    // What the keys and values hold, an attempt's and all attempts': a rank writing more
    // is refused rather than grow the coordinator until it is killed.
    size_t max_bytes_per_scope = size_t{512} << 20;
    size_t max_bytes = size_t{1} << 30;

    // The defaults, raised where jobs of `max_world_size` ranks need more: a full mesh
    // keeps a key per rank for each of its contexts (the world and each group the rank is
    // in, two membership epochs' at once: 16 a rank leaves room for votes and counters)
    // of the rank's addresses for all its peers (W^2 x 136 bytes a context: 142 MB at
    // 1024 ranks, 2.3 GB at 4096), and each rank waits on a few keys at once. What the
    // keys hold in all stays within half of `memory_bytes` (the host's), whatever the
    // world: an attempt needing more is refused its writes (FAILED_PRECONDITION).
    static Limits ForWorldsOf(int32_t max_world_size, size_t memory_bytes);
    // What an attempt of `world_size` ranks may hold: its full meshes' addresses.
    static size_t MeshBytesPerAttempt(int32_t world_size);
  };

  RendezvousStore() : RendezvousStore(Limits()) {}
  explicit RendezvousStore(const Limits& limits) : limits_(limits) {}

  // Opens the attempt's scope; `rank_tokens[r]` is rank r's token.
  void OpenScope(const std::string& job_id, int32_t attempt,
                 const std::vector<std::string>& rank_tokens);
  // Admits `rank` with `token` to the attempt's scope, opening it if it is not open: a
  // rank re-attached after a coordinator restart (whose scopes lived in memory only),
  // for the rendezvous of a later membership epoch. Keys set before are gone. A token the
  // rank held before (its lost worker's) is revoked.
  void AdmitRank(const std::string& job_id, int32_t attempt, int32_t rank,
                 const std::string& token);
  // Revokes the tokens of `ranks` (they left a fault-tolerant attempt, which trains on):
  // their holders' calls are refused (PERMISSION_DENIED) and their pending waits end with
  // ABORTED. A rank admitted again later (a replacement group) comes with a new token.
  void RevokeRanks(const std::string& job_id, int32_t attempt, const std::vector<int32_t>& ranks);
  // Closes the scope; its waits end with ABORTED.
  void CloseScope(const std::string& job_id, int32_t attempt);
  // Drops the attempt's keys of membership epochs before `epoch` (contracts/membership.h's
  // MembershipEpochOfKey; a key of none is the first connect's, epoch 0): their groups
  // have connected and moved on. Returns how many.
  size_t DropEpochsBefore(const std::string& job_id, int32_t attempt, int32_t epoch);
  // The attempt's ranks that have made no call on its scope yet, ascending (how the
  // join deadline tells a rank that never came from ranks that could not connect); empty
  // when the scope is not open.
  std::vector<int32_t> RanksNotReached(const std::string& job_id, int32_t attempt) const;

  absl::Status Set(const v1::RendezvousScope& scope, const std::string& key,
                   const std::string& value);
  // NOT_FOUND if the key is not set.
  absl::StatusOr<std::string> Get(const v1::RendezvousScope& scope, const std::string& key);
  // What the reads name, in their order: NOT_FOUND naming the first key unset,
  // INVALID_ARGUMENT for more reads than a wait may name keys or a negative offset or
  // length, OUT_OF_RANGE for a read past its value's end or past one reply's bytes.
  using Reads = google::protobuf::RepeatedPtrField<v1::RendezvousRead>;
  absl::StatusOr<std::vector<std::string>> GetMany(const v1::RendezvousScope& scope,
                                                   const Reads& reads);
  // Treats the value as a decimal counter (unset: 0) and adds `delta`; OUT_OF_RANGE past
  // 64 bits.
  absl::StatusOr<int64_t> Add(const v1::RendezvousScope& scope, const std::string& key,
                              int64_t delta);

  // Calls `done` exactly once: OK once every key is set, ABORTED if the scope closes, or
  // what ExpireWait/CancelWait say. A wait that cannot start (no such scope, not a rank's
  // token, too many keys or waits) calls `done` at once with the reason. Returns the
  // wait's id.
  using WaitDone = std::function<void(absl::Status)>;
  uint64_t WaitAsync(const v1::RendezvousScope& scope, std::vector<std::string> keys,
                     WaitDone done);
  // Ends a wait still pending: DEADLINE_EXCEEDED naming the keys still unset.
  void ExpireWait(uint64_t id);
  // Ends a wait still pending with CANCELLED (the caller went away).
  void CancelWait(uint64_t id);

  // Blocks until every key is set: OK; DEADLINE_EXCEEDED after `timeout`; ABORTED if the
  // scope closes meanwhile.
  absl::Status Wait(const v1::RendezvousScope& scope, const std::vector<std::string>& keys,
                    absl::Duration timeout);

 private:
  struct Pending {
    std::string scope;
    int32_t rank = 0;
    std::vector<std::string> keys;
    size_t missing = 0;
    size_t bytes = 0;  // its keys, held twice (here and in waiting_on): WaitBytes
    WaitDone done;
  };
  struct Scope {
    absl::flat_hash_map<std::string, int32_t> ranks;  // by token
    // Ranks 0 to world - 1 (tokens may be revoked: not ranks.size()); for a scope opened
    // by AdmitRank, one past the highest rank admitted.
    int32_t world = 0;
    absl::flat_hash_map<std::string, std::string> values;
    // For each key not yet set, the waits missing it.
    absl::flat_hash_map<std::string, std::vector<uint64_t>> waiting_on;
    absl::flat_hash_set<uint64_t> waits;
    absl::flat_hash_map<int32_t, size_t> waits_of_rank;
    absl::flat_hash_set<int32_t> reached;  // ranks that made a call
    size_t bytes = 0;                      // of its keys and values
    size_t wait_bytes = 0;                 // of its pending waits' keys (WaitBytes)
  };
  static std::string ScopeName(const std::string& job_id, int32_t attempt);
  // The open scope the call names, if the call carries one of its rank tokens (the rank
  // in `*rank`): FAILED_PRECONDITION for a scope that is not open, PERMISSION_DENIED for
  // a caller that holds none of its ranks.
  absl::StatusOr<Scope*> FindScope(const v1::RendezvousScope& scope, int32_t* rank = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // INVALID_ARGUMENT for a key of no bytes or over the limit, read or written, and for
  // more keys in one call than a wait may name.
  absl::Status CheckKey(const std::string& key) const;
  absl::Status CheckKeys(const std::vector<std::string>& keys) const;
  // The part of `value` that reads[i] names (its key's value): OUT_OF_RANGE past its end.
  static absl::StatusOr<std::string> ReadPart(const Reads& reads, int i, const std::string& value);
  absl::Status CheckWrite(const Scope& scope, const std::string& key, size_t value_size) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Forgets what `entry` held, from its scope's bytes and the store's.
  void ForgetBytesLocked(Scope& scope, const std::string& key, const std::string& value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stores the value and collects the waits it completes.
  void StoreLocked(Scope& scope, const std::string& key, std::string value,
                   std::vector<WaitDone>* completed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a wait on `keys` holds while it waits (`scope`'s keys not yet set, each kept by
  // the wait and by the key's list of waits): a wait is refused where it and the waits and
  // values held would pass the byte limits. Writes count values only, so that a waited-for
  // value is never refused for the waits it would end.
  static size_t WaitBytes(const Scope& scope, const std::vector<std::string>& keys);
  // Forgets wait `id` (`pending`, of `scope`) from the scope's waits and bytes as it ends.
  void ForgetWaitLocked(Scope& scope, uint64_t id, const Pending& pending)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `scope`'s pending waits of the ranks `revoked` says, adding their callbacks
  // to `ended`.
  void TakeWaitsOfRanksLocked(const Scope& scope, absl::FunctionRef<bool(int32_t)> revoked,
                              std::vector<WaitDone>* ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a pending wait; its callback, or null if it was no longer pending.
  WaitDone TakeWaitLocked(uint64_t id, absl::Status* status_if_expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Scope> scopes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;       // every scope's
  size_t wait_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // every scope's
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_RENDEZVOUS_STORE_H_
