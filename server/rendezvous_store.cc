#include "server/rendezvous_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise {

std::string RendezvousStore::ScopeName(const std::string& job_id, int32_t attempt) {
  return absl::StrCat(job_id, "#", attempt);
}

void RendezvousStore::OpenScope(const std::string& job_id, int32_t attempt) {
  absl::MutexLock lock(&mu_);
  scopes_[ScopeName(job_id, attempt)];
}

void RendezvousStore::CloseScope(const std::string& job_id, int32_t attempt) {
  absl::MutexLock lock(&mu_);
  scopes_.erase(ScopeName(job_id, attempt));
}

absl::StatusOr<const RendezvousStore::Scope*> RendezvousStore::FindScope(
    const std::string& job_id, int32_t attempt) const {
  auto it = scopes_.find(ScopeName(job_id, attempt));
  if (it == scopes_.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rendezvous: attempt ", attempt, " of job '", job_id, "' is not running"));
  }
  return &it->second;
}

absl::Status RendezvousStore::CheckWrite(const Scope& scope, const std::string& key,
                                         size_t value_size) const {
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous: key must have 1 to ",
                                                   limits_.max_key_bytes, " bytes, got ",
                                                   key.size()));
  }
  if (value_size > limits_.max_value_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("rendezvous: value of key '", key, "' has ",
                                                     value_size, " bytes; the limit is ",
                                                     limits_.max_value_bytes));
  }
  if (!scope.contains(key) && scope.size() >= limits_.max_keys_per_scope) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "rendezvous: the attempt already holds ", scope.size(), " keys; the limit is ",
        limits_.max_keys_per_scope));
  }
  return absl::OkStatus();
}

absl::Status RendezvousStore::Set(const std::string& job_id, int32_t attempt,
                                  const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Scope* scope, FindScope(job_id, attempt));
  RETURN_IF_ERROR(CheckWrite(*scope, key, value.size()));
  scopes_[ScopeName(job_id, attempt)][key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> RendezvousStore::Get(const std::string& job_id, int32_t attempt,
                                                 const std::string& key) const {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Scope* scope, FindScope(job_id, attempt));
  auto it = scope->find(key);
  if (it == scope->end()) return absl::NotFoundError(absl::StrCat("rendezvous: no key '", key, "'"));
  return it->second;
}

absl::Status RendezvousStore::Wait(const std::string& job_id, int32_t attempt,
                                   const std::vector<std::string>& keys,
                                   absl::Duration timeout) const {
  const std::string name = ScopeName(job_id, attempt);
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(FindScope(job_id, attempt).status());
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = scopes_.find(name);
    if (it == scopes_.end()) return true;
    for (const std::string& key : keys) {
      if (!it->second.contains(key)) return false;
    }
    return true;
  };
  const bool ready = mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  if (!scopes_.contains(name)) {
    return absl::AbortedError(absl::StrCat("rendezvous: attempt ", attempt, " of job '", job_id,
                                           "' ended while waiting"));
  }
  if (!ready) {
    const Scope& scope = scopes_.at(name);
    std::string missing;
    for (const std::string& key : keys) {
      if (!scope.contains(key)) absl::StrAppend(&missing, missing.empty() ? "" : ", ", key);
    }
    return absl::DeadlineExceededError(absl::StrCat("rendezvous: keys still unset: ", missing));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RendezvousStore::Add(const std::string& job_id, int32_t attempt,
                                             const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(const Scope* scope, FindScope(job_id, attempt));
  RETURN_IF_ERROR(CheckWrite(*scope, key, 0));
  std::string& value = scopes_[ScopeName(job_id, attempt)][key];
  int64_t current = 0;
  if (!value.empty() && !absl::SimpleAtoi(value, &current)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rendezvous: key '", key, "' holds a non-numeric value"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return absl::OutOfRangeError(absl::StrCat("rendezvous: adding ", delta, " to key '", key,
                                              "' (", current, ") overflows 64 bits"));
  }
  value = absl::StrCat(sum);
  return sum;
}

}  // namespace shardwise
