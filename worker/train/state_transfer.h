#ifndef SHARDWISE_WORKER_TRAIN_STATE_TRANSFER_H_
#define SHARDWISE_WORKER_TRAIN_STATE_TRANSFER_H_

// How the ranks of a new membership epoch come to agree on the state: each shard's live
// holders that committed the most steps give it to its holders that are behind (a
// replacement group, or a group one step behind after a split vote), point to point over
// the host world group. Every shard moves at once, each over its own pair of ranks (a
// donor with several receivers serves them in turn), and the shards take their donors in
// turn from the groups ahead, so that the transfer spreads over them. The donor sends the state's
// checksum (StateDigest) after it; the receiver checks it, so a state that arrives different is an
// error, never a model trained on.
//
// The plan (PlanStateMoves) is pure and the same on every rank, given the steps each
// rank committed (which the ranks all-reduce first).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/runtime/rank_position.h"
#include "worker/train/rank_state.h"

namespace shardwise {

// One shard's state moving from a live rank to a rank behind (ranks of the world group).
struct StateMove {
  int donor = 0;
  int receiver = 0;
  bool operator==(const StateMove& other) const {
    return donor == other.donor && receiver == other.receiver;
  }
};

// The moves of shard `shard_rank`, whose holders (world ranks, in replicate-group order)
// committed steps[holder] steps: the holders behind the most take it from the holders at
// the most, receiver j from donor (shard_rank + j) mod donors (a donor with several
// receivers serves them in turn). INTERNAL when no holder is at the most (the shard
// group's commit vote split: docs/semantics.md), or when no rank holds a state at all
// (steps -1 everywhere: replacements, or ranks whose transfer was cut short).
absl::StatusOr<std::vector<StateMove>> PlanStateMoves(const std::vector<double>& steps,
                                                      const std::vector<int>& holders,
                                                      int shard_rank);

// Where every rank of a new epoch goes on from, given each world rank's committed steps
// and the first thing after them it has not finished (next[rank], an AfterSteps as the
// heal's all-reduce carries it): the earliest unfinished among the ranks at the most
// steps, which the ranks behind take with the state. A collective may complete on one
// rank and fail on another (a ring's last messages lost to it alone), so one rank may
// have finished an evaluation or a checkpoint that a peer did not: both do it again, and
// their collectives pair up. INVALID_ARGUMENT when the two differ in length, or a value of
// `next` is no AfterSteps.
absl::StatusOr<AfterSteps> AgreedNext(const std::vector<double>& steps,
                                      const std::vector<double>& next);

// What a receiver got.
struct StateReceipt {
  int64_t bytes = 0;  // every byte that crossed, the layout and the digest included
  absl::Duration took;
  std::string digest;  // StateDigest of the state received, which matched the donor's
};

// The donor's side: `state` to world rank `receiver`, with `digest` (its StateDigest).
// `position` (may be null) is told the phases "sending parameters" and "sending
// optimizer state" as they begin.
absl::Status SendState(Communicator& world, int receiver, const RankState& state,
                       const std::string& digest, RankPosition* position);

// The receiver's side: `state` replaced by world rank `donor`'s, which must have the same
// layout (units and shard sizes); buffers of optimizer state it has none of yet are made
// under `optimizer_names` (a replacement that never stepped). DATA_LOSS if the state
// that arrived does not hash to the donor's digest. On any failure `state` holds part of
// the donor's and its steps are -1: behind every rank, to be healed whole again.
absl::StatusOr<StateReceipt> ReceiveState(Communicator& world, int donor,
                                          const std::vector<std::string>& optimizer_names,
                                          RankState* state, RankPosition* position);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_STATE_TRANSFER_H_
