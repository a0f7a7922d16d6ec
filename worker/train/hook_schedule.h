#ifndef SHARDWISE_WORKER_TRAIN_HOOK_SCHEDULE_H_
#define SHARDWISE_WORKER_TRAIN_HOOK_SCHEDULE_H_

// The communication-hook switches of one attempt, shared by the session thread (which
// receives them from the coordinator) and the training thread (which applies them at
// step boundaries). A switch is agreed in two phases, so that every rank changes at the
// same step or none does:
//   1. the coordinator proposes (version, hook, step); Propose answers whether this rank
//      can still honour it, i.e. has not started that step;
//   2. the coordinator commits (every rank accepted) or abandons (one could not).
// A rank that reaches a proposed step before the decision waits for it there; the
// coordinator picks the step ahead of the ranks' progress so that normally none waits.
// Switches already committed before this attempt (a restarted job) are given at start.
//
// Thread-safety: thread-safe.

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/monotonic_wait.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

class HookSchedule {
 public:
  // A switch known to be agreed (replayed from the job's history, or configured).
  void AddCommitted(int64_t step, const v1::CommHook& hook);

  // Phase 1: whether this rank can switch at `step`, i.e. has not started it. An accepted
  // proposal holds the training thread at `step` until Decide.
  bool Propose(int32_t version, int64_t step, const v1::CommHook& hook);
  // Phase 2.
  void Decide(int32_t version, bool commit);

  // The training thread, before running `step`: the hook in effect from this step (the
  // newest committed switch at or before it), or nullopt for the job's own. Waits while a proposal
  // for this step is undecided; fails with ABORTED if `abort` becomes true meanwhile.
  absl::StatusOr<std::optional<v1::CommHook>> HookForStep(int64_t step,
                                                          const std::atomic<bool>* abort);

  // The newest step the training thread has started (-1 before the first).
  int64_t started_step() const;

  // Whether the training thread waits in HookForStep for a proposal's decision now.
  bool holding() const;

 private:
  struct Proposal {
    int32_t version = 0;
    int64_t step = 0;
    v1::CommHook hook;
  };
  mutable absl::Mutex mu_;
  // Wakes HookForStep, whose waits (the abort flag's polls) are timed on the monotonic
  // clock (common/monotonic_wait.h).
  MonotonicWaker decided_;
  int64_t started_step_ ABSL_GUARDED_BY(mu_) = -1;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, v1::CommHook> committed_ ABSL_GUARDED_BY(mu_);  // by step
  std::optional<Proposal> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_HOOK_SCHEDULE_H_
