#ifndef SHARDWISE_BENCH_RANK_TRAINING_H_
#define SHARDWISE_BENCH_RANK_TRAINING_H_

// One rank of a benchmark job in this process (one of the processes RunRanks forks): the
// world connected over `store`, then the real trainer with an allocator of its own (and,
// for a job with fault_tolerance, a membership mailbox: its commit vote runs).
// `on_progress` sees every step's progress; `hooks` (e.g. an injected link latency) may
// be null. Returns the rank's result and its allocator's counters at the end.

#include <functional>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"
#include "worker/comm/data_plane.h"
#include "worker/train/trainer.h"

namespace shardwise::bench {

struct RankRun {
  TrainingResult result;
  MemoryStats memory;
};

inline absl::StatusOr<RankRun> TrainRank(const v1::JobSpec& spec, int rank,
                                         gloo::rendezvous::Store& store,
                                         std::function<void(const v1::Progress&)> on_progress,
                                         TrainingHooks* hooks = nullptr) {
  auto context = ConnectGlooContext(store, rank, spec.world_size(), {});
  if (!context.ok()) return context.status();
  CpuCachingAllocator allocator;
  TrainingContext training;
  training.rank = rank;
  training.world_size = spec.world_size();
  training.store = &store;
  training.world = *context;
  training.allocator = &allocator;
  training.on_progress = std::move(on_progress);
  // A fault-tolerant job's ranks vote before each optimizer step (nothing here sends a
  // membership change: the mailbox only enables the vote).
  MembershipMailbox membership;
  if (spec.has_fault_tolerance()) training.membership = &membership;
  auto result = Train(spec, training, hooks);
  if (!result.ok()) return result.status();
  return RankRun{*result, allocator.Stats()};
}

}  // namespace shardwise::bench

#endif  // SHARDWISE_BENCH_RANK_TRAINING_H_
