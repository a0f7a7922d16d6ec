#ifndef SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MOVES_H_
#define SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MOVES_H_

// A fault-tolerant rank's membership (spec.fault_tolerance): the epoch it trains in, that
// epoch's world and rendezvous, which ranks leave after the step just voted, and the moves
// from one epoch to the next, the rank's state healed from the live ranks on the way.
//
// The trainer calls it between steps, never inside one: after a step whose collective
// failed (Recover), after a step whose commit vote named ranks leaving or an epoch every
// rank holds (Regroup), and once at the start for a replacement (Join). A move:
//   1. waits for the coordinator's next membership (MembershipMailbox), or takes the one
//      every rank agreed on in its vote;
//   2. closes the failed epoch's connections, so that a live peer still waiting on this
//      rank fails at once, and has the trainer capture its state and end its runtime;
//   3. connects the epoch's world through the epoch's own rendezvous keys (EpochStore),
//      moving on to a newer epoch if a rank is lost meanwhile;
//   4. has the trainer connect its runtime over the new world, then heals: every rank takes
//      the state of the most steps any committed, each shard from a live rank that holds
//      it (state_transfer.h), and the trainer rebuilds its model from it;
//   5. tells the coordinator the epoch's first step (its leader, context.on_epoch_started).
// It owns the epoch's connections and the membership state; the trainer owns the model,
// the optimizer, the data and the runtime, which it exposes through Rank.
//
// Thread-safety: used by the rank's training thread only.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/log.h"
#include "contracts/fsdp_layout.h"
#include "gloo/context.h"
#include "proto/job_spec.pb.h"
#include "proto/worker_service.pb.h"
#include "worker/comm/communicator.h"
#include "worker/train/epoch_store.h"
#include "worker/train/rank_state.h"
#include "worker/train/state_transfer.h"
#include "worker/train/trainer.h"

namespace shardwise {

class MembershipMoves {
 public:
  // What a move does to the parts of the rank the trainer owns.
  class Rank {
   public:
    virtual ~Rank() = default;
    // What the rank carries across a move (rank_state.h).
    virtual absl::StatusOr<RankState> CaptureState() = 0;
    // Ends the model (its threads first), then the rank's groups and device.
    virtual void ReleaseRuntime() = 0;
    // Closes every group's connections of the runtime; false when there is none.
    virtual bool CloseRuntimeConnections() = 0;
    // Connects the runtime's groups over the epoch (`epoch_context`: its world, its rank
    // and size) with the peer timeout, and opens the epoch's data: the rank keeps its place
    // in its shard group (groups leave and join whole), else INTERNAL.
    virtual absl::Status ConnectRuntime(const TrainingContext& epoch_context) = 0;
    // The runtime's world group and sharding plan, once connected.
    virtual Communicator& World() = 0;
    virtual const fsdp::ShardingPlan& Plan() const = 0;
    // The model and optimizer rebuilt over the runtime from `state`.
    virtual absl::Status RestoreState(const RankState& state) = 0;
  };

  // `rank` outlives this object.
  MembershipMoves(const v1::JobSpec& spec, const TrainingContext& context, TrainingHooks* hooks,
                  Rank* rank);

  // Epoch 0: the attempt's world (context.world), its ranks 0 to world_size - 1.
  void Start();

  // Whether the attempt may survive `status` (a collective that failed: a peer lost or cut
  // out), which needs fault tolerance.
  bool Recoverable(const absl::Status& status) const;
  // The world's wait for a peer inside a collective: fault_tolerance.peer_timeout_seconds
  // (default 10 s), or the data plane's timeout without fault tolerance.
  std::chrono::milliseconds PeerTimeout() const;
  // Sets the epoch world's wait for a peer (around work longer than a step's collectives:
  // a checkpoint's barrier).
  void SetWorldTimeout(std::chrono::milliseconds timeout);

  int32_t epoch() const { return epoch_; }
  // The first step the epoch trains (the steps every live rank held once they moved to
  // it); 0 in epoch 0.
  int64_t epoch_first_step() const { return epoch_first_step_; }
  // The epoch's ranks, in the job's numbering, ascending.
  const std::vector<int32_t>& live_ranks() const { return live_ranks_; }

  // The commit vote's slots (CommitVote in trainer.cc): this rank's first, 1 ready or 2
  // ready and leaving with its group after `step` (its worker shutting down, or a test's
  // schedule; the first time it says so to the coordinator), and the newest membership
  // epoch it holds.
  float ReadyVote(int64_t step);
  float EpochVote() const;
  // The world's votes (`size` ready slots, then `size` epoch slots): which ranks leave
  // after this step, and the epoch every rank holds, if newer (one that adds ranks: a loss
  // would have failed a collective first).
  void Tally(const std::vector<float>& votes, int size);
  // Whether the step just voted ends with a move (Regroup).
  bool MovesAfterStep() const { return !leaving_.empty() || agreed_epoch_ > 0; }

  // After a step whose vote named ranks leaving: this rank's group leaves with them
  // (ABORTED, naming the step), or the rank trains on in the coordinator's next epoch.
  // `steps`: the steps done.
  absl::Status Regroup(int64_t steps);
  // The coordinator's next membership, the epoch's connections, the state every live rank
  // agrees on, the model rebuilt over the new world. `failure` is returned if no membership
  // change comes. `agreed`: the epoch to move to, which every rank holds (0: the newest
  // that comes).
  absl::Status Recover(const absl::Status& failure, int32_t agreed = 0);
  // A replacement (context.join): its epoch's world, and its state (`empty`: behind every
  // live rank) from the live ranks.
  absl::Status Join(RankState empty);

 private:
  // After a move that failed recoverably (`failure`): the epochs after `epoch` in turn,
  // with `state` kept (a rank behind keeps its step count: it is healed again), until a
  // move succeeds or no newer epoch comes.
  absl::Status MoveOnFrom(int32_t epoch, absl::Status failure, RankState* state);
  // The move's part after the teardown: `change`'s world and groups, the agreement on the
  // state, the model rebuilt from it. `rendezvous_wait` bounds the wait for the epoch's
  // ranks at its rendezvous.
  absl::Status MoveToEpoch(const v1::MembershipChange& change, RankState* state,
                           std::chrono::milliseconds rendezvous_wait);
  // Connects the world of `change`'s epoch (or of a later one, if a rank is lost while it
  // connects): the context the epoch's runtime connects its groups with.
  absl::StatusOr<TrainingContext> ConnectEpoch(v1::MembershipChange change,
                                               std::chrono::milliseconds rendezvous_wait);
  // This rank's connections in the failed epoch, every group's.
  void CloseConnections();
  // Every live rank agrees on the state of the step ahead: the ranks behind take their
  // shard's from a rank at it.
  absl::Status HealFromPeers(RankState* state);
  // This rank's part of `moves`: what it gives, what it takes.
  absl::Status GiveAndTake(Communicator& world, const std::vector<StateMove>& moves,
                           RankState* state);
  // Logs what a heal brought this rank, and tells the coordinator (context.on_state_received).
  void ReportStateReceived(const StateReceipt& receipt, int32_t donor, double steps);
  LogContext Log() const;

  const v1::JobSpec& spec_;
  const TrainingContext& context_;
  TrainingHooks* const hooks_;
  Rank* const rank_;
  int32_t epoch_ = 0;
  int64_t epoch_first_step_ = 0;
  std::shared_ptr<gloo::Context> world_;
  std::vector<int32_t> live_ranks_;
  std::vector<int32_t> leaving_;  // ranks whose groups leave after the step just voted
  bool said_leaving_ = false;
  int32_t agreed_epoch_ = 0;  // the epoch every rank moves to after the step just voted
  // The epoch's rendezvous, which the runtime's groups connect through.
  std::unique_ptr<EpochStore> epoch_store_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_MEMBERSHIP_MOVES_H_
