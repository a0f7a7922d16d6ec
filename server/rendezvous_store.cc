#include "server/rendezvous_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/monotonic_wait.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "contracts/membership.h"

namespace shardwise {

std::string RendezvousStore::ScopeName(const std::string& job_id, int32_t attempt) {
  return absl::StrCat(job_id, "#", attempt);
}

void RendezvousStore::OpenScope(const std::string& job_id, int32_t attempt,
                                const std::vector<std::string>& rank_tokens) {
  absl::MutexLock lock(&mu_);
  Scope& scope = scopes_[ScopeName(job_id, attempt)];
  scope.world = static_cast<int32_t>(rank_tokens.size());
  for (size_t rank = 0; rank < rank_tokens.size(); ++rank) {
    scope.ranks[rank_tokens[rank]] = static_cast<int32_t>(rank);
  }
}

void RendezvousStore::AdmitRank(const std::string& job_id, int32_t attempt, int32_t rank,
                                const std::string& token) {
  if (token.empty()) return;  // no rank may use an empty token
  std::vector<WaitDone> ended;
  {
    absl::MutexLock lock(&mu_);
    Scope& scope = scopes_[ScopeName(job_id, attempt)];
    // The rank's earlier holder (a worker lost, replaced) may no longer read or write here,
    // nor hold waits that count against the rank's limit.
    const size_t revoked = absl::erase_if(scope.ranks, [&](const auto& entry) {
      return entry.second == rank && entry.first != token;
    });
    if (revoked > 0) {
      TakeWaitsOfRanksLocked(
          scope, [rank](int32_t of) { return of == rank; }, &ended);
    }
    scope.ranks[token] = rank;
    scope.world = std::max(scope.world, rank + 1);
  }
  const absl::Status status =
      absl::AbortedError(absl::StrCat("rendezvous: rank ", rank, " of attempt ", attempt,
                                      " of job '", job_id, "' was admitted on another worker"));
  for (WaitDone& done : ended) done(status);
}

void RendezvousStore::RevokeRanks(const std::string& job_id, int32_t attempt,
                                  const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return;
  const auto revoked = [&ranks](int32_t rank) {
    return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
  };
  std::vector<WaitDone> ended;
  {
    absl::MutexLock lock(&mu_);
    auto it = scopes_.find(ScopeName(job_id, attempt));
    if (it == scopes_.end()) return;
    absl::erase_if(it->second.ranks, [&](const auto& entry) { return revoked(entry.second); });
    TakeWaitsOfRanksLocked(it->second, revoked, &ended);
  }
  const absl::Status status = absl::AbortedError(absl::StrCat(
      "rendezvous: the rank left attempt ", attempt, " of job '", job_id, "' with its group"));
  for (WaitDone& done : ended) done(status);
}

void RendezvousStore::TakeWaitsOfRanksLocked(const Scope& scope,
                                             absl::FunctionRef<bool(int32_t)> revoked,
                                             std::vector<WaitDone>* ended) {
  std::vector<uint64_t> ids;  // first: taking a wait changes scope.waits
  for (uint64_t id : scope.waits) {
    auto pending = pending_.find(id);
    if (pending != pending_.end() && revoked(pending->second.rank)) ids.push_back(id);
  }
  absl::Status ignored;
  for (uint64_t id : ids) {
    if (WaitDone done = TakeWaitLocked(id, &ignored)) ended->push_back(std::move(done));
  }
}

void RendezvousStore::CloseScope(const std::string& job_id, int32_t attempt) {
  std::vector<WaitDone> aborted;
  {
    absl::MutexLock lock(&mu_);
    auto it = scopes_.find(ScopeName(job_id, attempt));
    if (it == scopes_.end()) return;
    for (uint64_t id : it->second.waits) {
      auto pending = pending_.find(id);
      if (pending == pending_.end()) continue;
      aborted.push_back(std::move(pending->second.done));
      pending_.erase(pending);
    }
    bytes_ -= it->second.bytes;
    wait_bytes_ -= it->second.wait_bytes;
    scopes_.erase(it);
  }
  const absl::Status status = absl::AbortedError(
      absl::StrCat("rendezvous: attempt ", attempt, " of job '", job_id, "' ended while waiting"));
  for (WaitDone& done : aborted) done(status);
}

std::vector<int32_t> RendezvousStore::RanksNotReached(const std::string& job_id,
                                                      int32_t attempt) const {
  absl::MutexLock lock(&mu_);
  std::vector<int32_t> missing;
  auto it = scopes_.find(ScopeName(job_id, attempt));
  if (it == scopes_.end()) return missing;
  for (int32_t rank = 0; rank < it->second.world; ++rank) {
    if (!it->second.reached.contains(rank)) missing.push_back(rank);
  }
  return missing;
}

size_t RendezvousStore::DropEpochsBefore(const std::string& job_id, int32_t attempt,
                                         int32_t epoch) {
  absl::MutexLock lock(&mu_);
  auto it = scopes_.find(ScopeName(job_id, attempt));
  if (it == scopes_.end()) return 0;
  Scope& scope = it->second;
  return absl::erase_if(scope.values, [&](const auto& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // A key of no epoch is the attempt's first connect's (epoch 0's).
    if (MembershipEpochOfKey(entry.first).value_or(0) >= epoch) return false;
    ForgetBytesLocked(scope, entry.first, entry.second);
    return true;
  });
}

void RendezvousStore::ForgetBytesLocked(Scope& scope, const std::string& key,
                                        const std::string& value) {
  scope.bytes -= key.size() + value.size();
  bytes_ -= key.size() + value.size();
}

absl::StatusOr<RendezvousStore::Scope*> RendezvousStore::FindScope(const v1::RendezvousScope& scope,
                                                                   int32_t* rank) {
  auto it = scopes_.find(ScopeName(scope.job_id(), scope.attempt()));
  if (it == scopes_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("rendezvous: attempt ", scope.attempt(),
                                                      " of job '", ShownValue(scope.job_id()),
                                                      "' is not running"));
  }
  auto holder = it->second.ranks.find(scope.token());
  if (scope.token().empty() || holder == it->second.ranks.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("rendezvous: the caller holds no rank of attempt ", scope.attempt(),
                     " of job '", ShownValue(scope.job_id()),
                     "' (scope.token is not one of the attempt's rank tokens); only its "
                     "ranks may read or write its keys"));
  }
  it->second.reached.insert(holder->second);
  if (rank != nullptr) *rank = holder->second;
  return &it->second;
}

RendezvousStore::Limits RendezvousStore::Limits::ForWorldsOf(int32_t max_world_size,
                                                             size_t memory_bytes) {
  Limits limits;
  const size_t world = static_cast<size_t>(std::max<int32_t>(max_world_size, 1));
  limits.max_keys_per_scope = std::max(limits.max_keys_per_scope, 16 * world);
  limits.max_waits_per_scope = std::max(limits.max_waits_per_scope, 4 * world);
  // A rank's key holds its W-1 pair addresses of 136 bytes (full_mesh.h).
  limits.max_value_bytes = std::max(limits.max_value_bytes, (world - 1) * 136 + 4096);
  // A Gloo context holds W such keys; the world's and the groups' together are under 1.5
  // of those, two epochs' at once: up to half the host's memory in all.
  const size_t attempt_bytes = MeshBytesPerAttempt(max_world_size);
  const size_t cap = std::max(limits.max_bytes, memory_bytes / 2);
  limits.max_bytes = std::min(cap, std::max(limits.max_bytes, 2 * attempt_bytes));
  limits.max_bytes_per_scope =
      std::min(limits.max_bytes, std::max(limits.max_bytes_per_scope, attempt_bytes));
  return limits;
}

size_t RendezvousStore::Limits::MeshBytesPerAttempt(int32_t world_size) {
  const size_t world = static_cast<size_t>(std::max<int32_t>(world_size, 1));
  return 3 * world * (world - 1) * 136;
}

absl::Status RendezvousStore::CheckKey(const std::string& key) const {
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous: key must have 1 to ", limits_.max_key_bytes, " bytes, got ", key.size()));
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::CheckKeys(const std::vector<std::string>& keys) const {
  if (keys.size() > limits_.max_keys_per_wait) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: a call names ", keys.size(),
                                                   " keys; the limit is ",
                                                   limits_.max_keys_per_wait));
  }
  for (const std::string& key : keys) RETURN_IF_ERROR(CheckKey(key));
  return absl::OkStatus();
}

absl::Status RendezvousStore::CheckWrite(const Scope& scope, const std::string& key,
                                         size_t value_size) const {
  RETURN_IF_ERROR(CheckKey(key));
  // Bounds a retry cannot lift: not RESOURCE_EXHAUSTED, which a rank's client sends again
  // (the coordinator's full call pool answers that, for a call it did not run).
  if (value_size > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: value of key '", ShownValue(key),
                                                   "' has ", value_size, " bytes; the limit is ",
                                                   limits_.max_value_bytes));
  }
  const auto old = scope.values.find(key);
  if (old == scope.values.end() && scope.values.size() >= limits_.max_keys_per_scope) {
    return absl::FailedPreconditionError(absl::StrCat("rendezvous: the attempt already holds ",
                                                      scope.values.size(), " keys; the limit is ",
                                                      limits_.max_keys_per_scope));
  }
  // What the write adds, less what the value it replaces held.
  const size_t freed = old == scope.values.end() ? 0 : key.size() + old->second.size();
  const size_t added = key.size() + value_size;
  if (scope.bytes - freed + added > limits_.max_bytes_per_scope) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rendezvous: the attempt's keys and values hold ", scope.bytes, " bytes; writing ", added,
        " more passes its limit of ", limits_.max_bytes_per_scope));
  }
  if (bytes_ - freed + added > limits_.max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous: the coordinator's rendezvous holds ", bytes_, " bytes; writing ",
                     added, " more passes its limit of ", limits_.max_bytes));
  }
  return absl::OkStatus();
}

void RendezvousStore::StoreLocked(Scope& scope, const std::string& key, std::string value,
                                  std::vector<WaitDone>* completed) {
  const auto [stored, added] = scope.values.try_emplace(key);
  if (!added) ForgetBytesLocked(scope, key, stored->second);
  scope.bytes += key.size() + value.size();
  bytes_ += key.size() + value.size();
  stored->second = std::move(value);
  auto waiting = scope.waiting_on.find(key);
  if (waiting == scope.waiting_on.end()) return;
  for (uint64_t id : waiting->second) {
    auto pending = pending_.find(id);
    if (pending == pending_.end() || --pending->second.missing > 0) continue;
    completed->push_back(std::move(pending->second.done));
    ForgetWaitLocked(scope, id, pending->second);
    pending_.erase(pending);
  }
  scope.waiting_on.erase(waiting);
}

absl::Status RendezvousStore::Set(const v1::RendezvousScope& name, const std::string& key,
                                  const std::string& value) {
  std::vector<WaitDone> completed;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Scope * scope, FindScope(name));
    RETURN_IF_ERROR(CheckWrite(*scope, key, value.size()));
    StoreLocked(*scope, key, value, &completed);
  }
  for (WaitDone& done : completed) done(absl::OkStatus());
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(const v1::RendezvousScope& name,
                                                 const std::string& key) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Scope* scope, FindScope(name));
  RETURN_IF_ERROR(CheckKey(key));
  auto it = scope->values.find(key);
  if (it == scope->values.end()) {
    return absl::NotFoundError(absl::StrCat("rendezvous: no key '", ShownValue(key), "'"));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::string>> RendezvousStore::GetMany(const v1::RendezvousScope& name,
                                                                  const Reads& reads) {
  std::vector<std::string> keys;
  keys.reserve(reads.size());
  for (const v1::RendezvousRead& read : reads) keys.push_back(read.key());
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Scope* scope, FindScope(name));
  RETURN_IF_ERROR(CheckKeys(keys));
  std::vector<std::string> values;
  values.reserve(keys.size());
  size_t bytes = 0;
  for (int i = 0; i < reads.size(); ++i) {
    auto it = scope->values.find(keys[i]);
    if (it == scope->values.end()) {
      return absl::NotFoundError(absl::StrCat("rendezvous: no key '", ShownValue(keys[i]), "'"));
    }
    ASSIGN_OR_RETURN(std::string part, ReadPart(reads, i, it->second));
    bytes += part.size();
    if (bytes > limits_.max_reply_bytes) {
      return absl::OutOfRangeError(absl::StrCat("rendezvous: ", reads.size(),
                                                " reads pass one reply's ", limits_.max_reply_bytes,
                                                " bytes at reads[", i, "]: ask for fewer"));
    }
    values.push_back(std::move(part));
  }
  return values;
}

absl::StatusOr<std::string> RendezvousStore::ReadPart(const Reads& reads, int i,
                                                      const std::string& value) {
  const v1::RendezvousRead& read = reads[i];
  if (read.offset() < 0 || read.length() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("reads[", i,
                                                   "]: offset and length must be >= 0, got ",
                                                   read.offset(), " and ", read.length()));
  }
  const uint64_t size = value.size();
  const uint64_t offset = static_cast<uint64_t>(read.offset());
  const uint64_t length =
      read.length() == 0 && offset <= size ? size - offset : static_cast<uint64_t>(read.length());
  if (offset > size || length > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("reads[", i, "]: key '", ShownValue(read.key()),
                                              "' has ", size, " bytes, read ", length,
                                              " from offset ", offset));
  }
  return value.substr(offset, length);
}

absl::StatusOr<int64_t> RendezvousStore::Add(const v1::RendezvousScope& name,
                                             const std::string& key, int64_t delta) {
  std::vector<WaitDone> completed;
  int64_t sum = 0;
  {
    absl::MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(Scope * scope, FindScope(name));
    RETURN_IF_ERROR(CheckWrite(*scope, key, 0));
    int64_t current = 0;
    auto it = scope->values.find(key);
    if (it != scope->values.end() && !it->second.empty() &&
        !absl::SimpleAtoi(it->second, &current)) {
      return absl::FailedPreconditionError(
          absl::StrCat("rendezvous: key '", ShownValue(key), "' holds a non-numeric value"));
    }
    if (__builtin_add_overflow(current, delta, &sum)) {
      return absl::OutOfRangeError(absl::StrCat("rendezvous: adding ", delta, " to key '",
                                                ShownValue(key), "' (", current,
                                                ") overflows 64 bits"));
    }
    StoreLocked(*scope, key, absl::StrCat(sum), &completed);
  }
  for (WaitDone& done : completed) done(absl::OkStatus());
  return sum;
}

uint64_t RendezvousStore::WaitAsync(const v1::RendezvousScope& name, std::vector<std::string> keys,
                                    WaitDone done) {
  absl::Status refused;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    id = next_wait_id_++;
    int32_t rank = 0;
    auto scope = FindScope(name, &rank);
    if (!scope.ok()) {
      refused = scope.status();
    } else if (const absl::Status bad_key = CheckKeys(keys); !bad_key.ok()) {
      refused = bad_key;
    } else if ((*scope)->waits.size() >= limits_.max_waits_per_scope ||
               (*scope)->waits_of_rank[rank] >= limits_.max_waits_per_rank) {
      refused = absl::ResourceExhaustedError(
          absl::StrCat("rendezvous: rank ", rank, " already has ", (*scope)->waits_of_rank[rank],
                       " waits pending (the attempt ", (*scope)->waits.size(), "); the limits are ",
                       limits_.max_waits_per_rank, " per rank and ", limits_.max_waits_per_scope,
                       " per attempt"));
    } else if (const size_t wait_bytes = WaitBytes(**scope, keys);
               wait_bytes > 0 &&  // one that holds nothing never passes them
               ((*scope)->bytes + (*scope)->wait_bytes + wait_bytes > limits_.max_bytes_per_scope ||
                bytes_ + wait_bytes_ + wait_bytes > limits_.max_bytes)) {
      refused = absl::ResourceExhaustedError(absl::StrCat(
          "rendezvous: a wait on ", keys.size(), " keys holds ", wait_bytes,
          " bytes while it waits; the attempt holds ", (*scope)->bytes + (*scope)->wait_bytes,
          " of its limit of ", limits_.max_bytes_per_scope, ", the coordinator ",
          bytes_ + wait_bytes_, " of ", limits_.max_bytes));
    } else {
      Pending pending;
      pending.scope = ScopeName(name.job_id(), name.attempt());
      pending.rank = rank;
      for (const std::string& key : keys) {
        if ((*scope)->values.contains(key)) continue;
        std::vector<uint64_t>& waits = (*scope)->waiting_on[key];
        if (!waits.empty() && waits.back() == id) continue;  // a key named twice
        waits.push_back(id);
        ++pending.missing;
      }
      if (pending.missing > 0) {
        pending.bytes = wait_bytes;  // the else-if condition's, in scope through this branch
        pending.keys = std::move(keys);
        pending.done = std::move(done);
        (*scope)->waits.insert(id);
        ++(*scope)->waits_of_rank[rank];
        (*scope)->wait_bytes += pending.bytes;
        wait_bytes_ += pending.bytes;
        pending_.emplace(id, std::move(pending));
        return id;
      }
    }
  }
  done(refused);  // OK when every key was already set
  return id;
}

size_t RendezvousStore::WaitBytes(const Scope& scope, const std::vector<std::string>& keys) {
  size_t bytes = 0;
  for (const std::string& key : keys) {
    if (!scope.values.contains(key)) bytes += 2 * key.size();
  }
  return bytes;
}

void RendezvousStore::ForgetWaitLocked(Scope& scope, uint64_t id, const Pending& pending) {
  scope.waits.erase(id);
  --scope.waits_of_rank[pending.rank];
  scope.wait_bytes -= pending.bytes;
  wait_bytes_ -= pending.bytes;
}

RendezvousStore::WaitDone RendezvousStore::TakeWaitLocked(uint64_t id, absl::Status* expired) {
  auto pending = pending_.find(id);
  if (pending == pending_.end()) return nullptr;
  auto scope = scopes_.find(pending->second.scope);
  std::string missing;
  if (scope != scopes_.end()) {
    ForgetWaitLocked(scope->second, id, pending->second);
    for (const std::string& key : pending->second.keys) {
      if (scope->second.values.contains(key)) continue;
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
      std::vector<uint64_t>& waits = scope->second.waiting_on[key];
      waits.erase(std::remove(waits.begin(), waits.end(), id), waits.end());
      if (waits.empty()) scope->second.waiting_on.erase(key);
    }
  }
  *expired = absl::DeadlineExceededError(absl::StrCat("rendezvous: keys still unset: ", missing));
  WaitDone done = std::move(pending->second.done);
  pending_.erase(pending);
  return done;
}

void RendezvousStore::ExpireWait(uint64_t id) {
  absl::Status status;
  WaitDone done;
  {
    absl::MutexLock lock(&mu_);
    done = TakeWaitLocked(id, &status);
  }
  if (done) done(status);
}

void RendezvousStore::CancelWait(uint64_t id) {
  absl::Status ignored;
  WaitDone done;
  {
    absl::MutexLock lock(&mu_);
    done = TakeWaitLocked(id, &ignored);
  }
  if (done) done(absl::CancelledError("rendezvous: wait cancelled"));
}

absl::Status RendezvousStore::Wait(const v1::RendezvousScope& scope,
                                   const std::vector<std::string>& keys, absl::Duration timeout) {
  struct Result {
    MonotonicNotification done;  // the wait's timeout on the monotonic clock
    absl::Status status;
  };
  auto result = std::make_shared<Result>();
  const uint64_t id = WaitAsync(scope, keys, [result](absl::Status status) {
    result->status = std::move(status);
    result->done.Notify();
  });
  if (!result->done.WaitForNotificationWithTimeout(timeout)) ExpireWait(id);
  result->done.WaitForNotification();
  return result->status;
}

}  // namespace shardwise
