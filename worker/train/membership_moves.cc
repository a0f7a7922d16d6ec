#include "worker/train/membership_moves.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "contracts/membership.h"
#include "worker/comm/data_plane.h"
#include "worker/fsdp/optimizer.h"

namespace shardwise {

MembershipMoves::MembershipMoves(const v1::JobSpec& spec, const TrainingContext& context,
                                 TrainingHooks* hooks, Rank* rank)
    : spec_(spec), context_(context), hooks_(hooks), rank_(rank) {}

void MembershipMoves::Start() {
  live_ranks_.resize(context_.world_size);
  std::iota(live_ranks_.begin(), live_ranks_.end(), 0);
  world_ = context_.world;
}

bool MembershipMoves::Recoverable(const absl::Status& status) const {
  return context_.membership != nullptr &&
         (absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status));
}

std::chrono::milliseconds MembershipMoves::PeerTimeout() const {
  if (context_.membership == nullptr) return context_.data_plane.timeout;
  return absl::ToChronoMilliseconds(shardwise::PeerTimeout(spec_));
}

void MembershipMoves::SetWorldTimeout(std::chrono::milliseconds timeout) {
  world_->setTimeout(timeout);
}

LogContext MembershipMoves::Log() const {
  return LogContext().Job(context_.job_id).Attempt(context_.attempt).Rank(context_.rank);
}

// ---- the commit vote ----

float MembershipMoves::ReadyVote(int64_t step) {
  const bool asks =
      (context_.leave != nullptr && context_.leave->load()) || hooks_->LeaveAfter(step);
  if (asks && !said_leaving_) {
    said_leaving_ = true;
    if (context_.on_leaving) context_.on_leaving(step);
  }
  return asks ? 2.0f : 1.0f;
}

float MembershipMoves::EpochVote() const {
  return static_cast<float>(context_.membership->Newest());
}

void MembershipMoves::Tally(const std::vector<float>& votes, int size) {
  leaving_.clear();
  for (int i = 0; i < size; ++i) {
    if (votes[i] == 2.0f) leaving_.push_back(live_ranks_[i]);
  }
  const auto [fewest, most] = std::minmax_element(votes.begin() + size, votes.end());
  agreed_epoch_ = *fewest == *most && *most > epoch_ ? static_cast<int32_t>(*most) : 0;
}

// ---- moves ----

absl::Status MembershipMoves::Regroup(int64_t steps) {
  const std::vector<int32_t> leaving = std::exchange(leaving_, {});
  // Ranks leaving go first: the coordinator's epoch without them comes after any other.
  const int32_t agreed = leaving.empty() ? std::exchange(agreed_epoch_, 0) : 0;
  agreed_epoch_ = 0;
  const std::string who = agreed > 0 ? absl::StrCat("every rank holds membership epoch ", agreed)
                                     : absl::StrCat(leaving.size() == 1 ? "rank " : "ranks ",
                                                    absl::StrJoin(leaving, ", "),
                                                    " asked to leave after step ", steps - 1);
  for (int32_t rank : leaving) {
    const std::vector<int32_t> group = ReplicaGroupOf(spec_, rank);
    if (std::find(group.begin(), group.end(), context_.rank) != group.end()) {
      return absl::AbortedError(
          absl::StrCat("rank ", context_.rank, " left the attempt with its group: ", who));
    }
  }
  const absl::Time start = Clock::Real().Now();
  RETURN_IF_ERROR(Recover(absl::UnavailableError(absl::StrCat(
                              who, ", but no membership change came from the coordinator")),
                          agreed));
  LogInfo(Log(), absl::StrCat(who, "; membership epoch ", epoch_, ": ", live_ranks_.size(),
                              " ranks train on from step ", epoch_first_step_, " after ",
                              absl::FormatDuration(Clock::Real().Now() - start)));
  return absl::OkStatus();
}

absl::Status MembershipMoves::Recover(const absl::Status& failure, int32_t agreed) {
  // A vote's leavers are in the coordinator's next epoch as well; the epoch a vote agreed
  // on is this move's, or older than it.
  leaving_.clear();
  agreed_epoch_ = 0;
  if (context_.position != nullptr) context_.position->SetPhase(kAwaitingMembershipPhase);
  auto change = agreed > 0
                    ? context_.membership->Epoch(agreed)
                    : context_.membership->WaitForEpochAbove(
                          epoch_, absl::FromChrono(context_.data_plane.timeout), context_.abort);
  if (!change.ok()) {
    return absl::Status(failure.code(),
                        absl::StrCat(failure.message(), "; ", change.status().message()));
  }
  // The epoch's connections close first: a live peer still waiting on this rank in one of
  // its collectives fails at once (closing a connection only fails the other side's
  // waits, so each rank closes its own once it knows the change, not before).
  CloseConnections();
  ASSIGN_OR_RETURN(RankState state, rank_->CaptureState());
  rank_->ReleaseRuntime();
  absl::Status moved = MoveToEpoch(*change, &state, context_.data_plane.timeout);
  if (moved.ok() || !Recoverable(moved)) return moved;
  return MoveOnFrom(change->epoch(), std::move(moved), &state);
}

absl::Status MembershipMoves::Join(RankState empty) {
  // The live ranks come at a step boundary, which may be further off than the data
  // plane's timeout (context.join_wait: the coordinator's JoinerWait).
  absl::Status moved = MoveToEpoch(*context_.join, &empty,
                                   std::max(context_.data_plane.timeout, context_.join_wait));
  if (moved.ok() || !Recoverable(moved)) return moved;
  // A donor lost while it gave, or a newer epoch while the groups connected: the
  // coordinator's next epoch, where a live rank that holds the shard gives it (this rank
  // is still behind them).
  return MoveOnFrom(context_.join->epoch(), std::move(moved), &empty);
}

void MembershipMoves::CloseConnections() {
  if (!rank_->CloseRuntimeConnections() && world_ != nullptr) world_->closeConnections();
}

absl::Status MembershipMoves::MoveOnFrom(int32_t epoch, absl::Status failure, RankState* state) {
  while (true) {
    // Peers still waiting on this rank in the failed epoch fail at once.
    CloseConnections();
    rank_->ReleaseRuntime();
    auto change = context_.membership->WaitForEpochAbove(
        epoch, absl::FromChrono(context_.data_plane.timeout), context_.abort);
    if (!change.ok()) {
      return absl::Status(failure.code(),
                          absl::StrCat(failure.message(), "; ", change.status().message()));
    }
    failure = MoveToEpoch(*change, state, context_.data_plane.timeout);
    if (failure.ok() || !Recoverable(failure)) return failure;
    epoch = change->epoch();
  }
}

absl::Status MembershipMoves::MoveToEpoch(const v1::MembershipChange& change, RankState* state,
                                          std::chrono::milliseconds rendezvous_wait) {
  ASSIGN_OR_RETURN(TrainingContext epoch_context, ConnectEpoch(change, rendezvous_wait));
  RETURN_IF_ERROR(rank_->ConnectRuntime(epoch_context));
  RETURN_IF_ERROR(HealFromPeers(state));
  RETURN_IF_ERROR(rank_->RestoreState(*state));
  // Every rank holds the same steps now (the heal): the epoch's first step, from which
  // every rank of the epoch counts its collectives (the coordinator's stall detector
  // compares them).
  epoch_first_step_ = static_cast<int64_t>(state->steps);
  if (context_.position != nullptr) context_.position->StartEpoch(epoch_);
  if (rank_->World().rank() == 0 && context_.on_epoch_started) {
    context_.on_epoch_started(epoch_, epoch_first_step_);
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainingContext> MembershipMoves::ConnectEpoch(
    v1::MembershipChange change, std::chrono::milliseconds rendezvous_wait) {
  while (true) {
    const auto& live = change.live_ranks();
    const auto me = std::find(live.begin(), live.end(), context_.rank);
    if (me == live.end()) {
      return absl::AbortedError(
          absl::StrCat("rank ", context_.rank, " left the attempt in epoch ", change.epoch()));
    }
    // Every group of the epoch, the world and those the runtime connects, under keys of
    // its own, given up once a newer epoch comes (epoch_store.h).
    epoch_store_ = std::make_unique<EpochStore>(
        change.epoch(), *context_.store,
        [membership = context_.membership, epoch = change.epoch()] {
          return membership->Newest() > epoch;
        },
        rendezvous_wait);
    TrainingContext epoch_context = context_;
    epoch_context.store = epoch_store_.get();
    epoch_context.rank = static_cast<int>(me - live.begin());
    epoch_context.world_size = static_cast<int>(live.size());
    // Each pair's first connection waits at most the peer timeout (Gloo waits 5 times its
    // context's timeout), the world's and the groups' the runtime connects: a peer that
    // gave this epoch up after this rank read its address cannot hold it for minutes.
    epoch_context.data_plane.connect_timeout =
        std::max(std::chrono::milliseconds(1), PeerTimeout() / 5);
    auto world = ConnectGlooContext(*epoch_store_, epoch_context.rank, epoch_context.world_size,
                                    epoch_context.data_plane);
    if (world.ok()) {
      world_ = *std::move(world);  // its peer timeout is set with the runtime's groups
      epoch_ = change.epoch();
      live_ranks_.assign(live.begin(), live.end());
      epoch_context.world = world_;
      return epoch_context;
    }
    // Another rank lost while this epoch connected: the next epoch, if one comes soon.
    auto newer = context_.membership->WaitForEpochAbove(
        change.epoch(), absl::FromChrono(PeerTimeout()), context_.abort);
    if (!newer.ok()) return world.status();
    LogInfo(Log(), absl::StrCat("membership epoch ", change.epoch(), " did not connect (",
                                world.status().message(), "): epoch ", newer->epoch(), " instead"));
    change = *std::move(newer);
  }
}

// ---- the heal ----

// A rank that committed the step in flight (its votes completed) while another's failed is
// one step ahead, and with it its whole shard group (CommitVote); a replacement is behind
// every live rank. Every rank takes the state of the step ahead, and goes on from the
// earliest part after it that a rank there has not finished (AgreedNext).
absl::Status MembershipMoves::HealFromPeers(RankState* state) {
  Communicator& world = rank_->World();
  const fsdp::ShardingPlan& plan = rank_->Plan();
  // Each rank's steps, then each rank's next part after them.
  const int size = world.size();
  std::vector<double> said(2 * static_cast<size_t>(size), 0.0);
  said[world.rank()] = state->steps;
  said[size + world.rank()] = static_cast<double>(state->next);
  RETURN_IF_ERROR(world.AllReduce(said.data(), said.size(), ScalarType::kFloat64));
  const std::vector<double> steps(said.begin(), said.begin() + size);
  ASSIGN_OR_RETURN(state->next, AgreedNext(steps, {said.begin() + size, said.end()}));
  ASSIGN_OR_RETURN(const std::vector<StateMove> moves,
                   PlanStateMoves(steps, plan.ReplicateGroupRanks(), plan.shard_rank));
  if (std::all_of(steps.begin(), steps.end(), [&](double s) { return s == steps[0]; })) {
    return absl::OkStatus();  // nothing moves anywhere
  }
  // A transfer takes as long as its bytes do, not the peer timeout a step's collectives
  // wait (a donor with several receivers serves them in turn): every rank waits for the
  // heal with the data plane's timeout, all of them at the barrier after it, then goes
  // back to the peer timeout.
  world_->setTimeout(context_.data_plane.timeout);
  RETURN_IF_ERROR(GiveAndTake(world, moves, state));
  RETURN_IF_ERROR(world.Barrier());
  world_->setTimeout(PeerTimeout());
  return absl::OkStatus();
}

absl::Status MembershipMoves::GiveAndTake(Communicator& world, const std::vector<StateMove>& moves,
                                          RankState* state) {
  const int shard = rank_->Plan().shard_rank;
  std::string digest;  // this rank's, once it gives
  for (const StateMove& move : moves) {
    if (move.donor == world.rank()) {
      if (digest.empty()) digest = StateDigest(*state);
      RETURN_IF_ERROR(SendState(world, move.receiver, *state, digest, context_.position));
      LogInfo(Log(), absl::StrCat("gave shard ", shard, " of step ", state->steps, " to rank ",
                                  live_ranks_[move.receiver], ": checksum ", digest));
    } else if (move.receiver == world.rank()) {
      ASSIGN_OR_RETURN(
          const StateReceipt receipt,
          ReceiveState(world, move.donor, fsdp::Optimizer::StateNames(spec_.optimizer()), state,
                       context_.position));
      ReportStateReceived(receipt, live_ranks_[move.donor], state->steps);
    }
  }
  return absl::OkStatus();
}

void MembershipMoves::ReportStateReceived(const StateReceipt& receipt, int32_t donor,
                                          double steps) {
  const int shard = rank_->Plan().shard_rank;
  LogInfo(Log(), absl::StrCat("took shard ", shard, " of step ", steps, " from rank ", donor, ": ",
                              receipt.bytes, " bytes of parameters and optimizer state in ",
                              absl::FormatDuration(receipt.took), ", checksum ", receipt.digest));
  if (!context_.on_state_received) return;
  v1::StateTransfer transfer;
  transfer.set_epoch(epoch_);
  transfer.set_donor_rank(donor);
  transfer.set_shard(shard);
  transfer.set_step(static_cast<int64_t>(steps));
  transfer.set_bytes(receipt.bytes);
  transfer.set_micros(absl::ToInt64Microseconds(receipt.took));
  transfer.set_checksum(receipt.digest);
  context_.on_state_received(transfer);
}

}  // namespace shardwise
