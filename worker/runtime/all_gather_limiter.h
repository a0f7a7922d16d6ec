#ifndef SHARDWISE_WORKER_RUNTIME_ALL_GATHER_LIMITER_H_
#define SHARDWISE_WORKER_RUNTIME_ALL_GATHER_LIMITER_H_

// FSDP's limit_all_gathers rate limiter (docs/semantics.md, "Execution order and
// prefetch"): every reshard records a "freed" event on the compute stream; before an
// unshard allocates its full buffer, if `max_in_flight` (two) frees are pending, it waits
// for the oldest. This bounds the
// all-gathered units alive at once when the CPU thread runs ahead of the GPU: without it
// the unshard stream could gather every unit before the compute stream freed any.
//
// On CPUs a reshard frees its buffer at once, so no free is ever pending and the limiter
// is not used. `Event` is FsdpModel's FreeEvent (a device fence it waits for on the
// host); any type with `absl::Status Synchronize()` does.
//
// Thread-safety: none; the training thread owns it (the reshards of upcast threads are
// NO_SHARD's, which never use it).

#include <deque>
#include <utility>

#include "absl/status/status.h"

namespace shardwise {

template <typename Event>
class AllGatherLimiter {
 public:
  explicit AllGatherLimiter(int max_in_flight = 2) : max_in_flight_(max_in_flight) {}

  // Before an unshard: waits for the oldest pending free if `max_in_flight` are pending.
  // Returns whether it waited, or the event's error.
  absl::Status BeforeUnshard(bool* waited = nullptr) {
    if (waited != nullptr) *waited = false;
    if (static_cast<int>(pending_.size()) < max_in_flight_) return absl::OkStatus();
    Event oldest = std::move(pending_.front());
    pending_.pop_front();
    if (waited != nullptr) *waited = true;
    return oldest.Synchronize();
  }

  // After a reshard: `freed` is recorded on the stream that last used the freed buffer.
  void OnReshard(Event freed) { pending_.push_back(std::move(freed)); }

  int pending() const { return static_cast<int>(pending_.size()); }

 private:
  const int max_in_flight_;
  std::deque<Event> pending_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_ALL_GATHER_LIMITER_H_
