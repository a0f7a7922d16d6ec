#include "worker/train/state_transfer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/status_macros.h"

namespace shardwise {
namespace {

constexpr size_t kDigestChars = 32;        // XXH3-128 in hex
constexpr int64_t kMaxScalerBytes = 1024;  // a GradScalerState is a few numbers

void Phase(RankPosition* position, const char* phase) {
  if (position != nullptr) position->SetPhase(phase);
}

// The layout a receiver checks before any float crosses: units, the scaler's bytes, then
// per unit its shard's floats and its optimizer buffers.
std::vector<int64_t> Layout(const RankState& state, size_t scaler_bytes) {
  std::vector<int64_t> layout = {static_cast<int64_t>(state.shards.size()),
                                 static_cast<int64_t>(scaler_bytes)};
  for (size_t u = 0; u < state.shards.size(); ++u) {
    layout.push_back(static_cast<int64_t>(state.shards[u].size()));
    layout.push_back(u < state.optimizer.size() ? static_cast<int64_t>(state.optimizer[u].size())
                                                : 0);
  }
  return layout;
}

// Makes room for the optimizer buffers of every unit that has none yet (a replacement
// that never stepped), as a donor that stepped sends them; returns which units it made
// them for. Done before the donor's first byte, while the receiver waits for the live
// ranks to reach the step they move at, so that the transfer's clock finds the pages
// already touched.
std::vector<bool> PrepareOptimizerState(const std::vector<std::string>& optimizer_names,
                                        RankState* state) {
  state->optimizer.resize(state->shards.size());
  std::vector<bool> prepared(state->shards.size(), false);
  for (size_t u = 0; u < state->shards.size(); ++u) {
    auto& unit = state->optimizer[u];
    if (!unit.empty()) continue;
    for (const std::string& name : optimizer_names) {
      unit.emplace_back(name, std::vector<float>(state->shards[u].size()));
    }
    prepared[u] = !optimizer_names.empty();
  }
  return prepared;
}

// Checks the donor's `layout` against this rank's state; the units `prepared` for
// optimizer state the donor has none of (it never stepped either) drop it again.
absl::Status AdoptLayout(const std::vector<int64_t>& layout, const std::vector<bool>& prepared,
                         RankState* state) {
  for (size_t u = 0; u < state->shards.size(); ++u) {
    const int64_t numel = layout[2 + 2 * u], buffers = layout[3 + 2 * u];
    if (numel != static_cast<int64_t>(state->shards[u].size())) {
      return absl::InternalError(absl::StrCat("unit ", u, "'s shard has ", numel,
                                              " floats on the donor, ", state->shards[u].size(),
                                              " here"));
    }
    auto& unit = state->optimizer[u];
    if (static_cast<int64_t>(unit.size()) == buffers) continue;
    if (!prepared[u] || buffers != 0) {
      return absl::InternalError(absl::StrCat("unit ", u, " has ", prepared[u] ? 0 : unit.size(),
                                              " optimizer state buffers here, ", buffers,
                                              " on the donor"));
    }
    unit.clear();
  }
  return absl::OkStatus();
}

absl::Span<const char> Bytes(const std::vector<float>& values) {
  return {reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)};
}

absl::Span<char> MutableBytes(std::vector<float>& values) {
  return {reinterpret_cast<char*>(values.data()), values.size() * sizeof(float)};
}

}  // namespace

absl::StatusOr<AfterSteps> AgreedNext(const std::vector<double>& steps,
                                      const std::vector<double>& next) {
  if (steps.size() != next.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the heal's agreement has ", steps.size(),
                                                   " ranks' steps and ", next.size(),
                                                   " ranks' next parts"));
  }
  double most = -1;
  for (double s : steps) most = std::max(most, s);
  auto agreed = AfterSteps::kNextStep;
  for (size_t rank = 0; rank < steps.size(); ++rank) {
    const double part = next[rank];
    if (part != static_cast<double>(AfterSteps::kCheckpoint) &&
        part != static_cast<double>(AfterSteps::kEvaluation) &&
        part != static_cast<double>(AfterSteps::kNextStep)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " says it goes on from part ", part,
                       " after its steps: none of checkpoint (0), evaluation (1), next step (2)"));
    }
    if (steps[rank] == most) agreed = std::min(agreed, static_cast<AfterSteps>(part));
  }
  return agreed;
}

absl::StatusOr<std::vector<StateMove>> PlanStateMoves(const std::vector<double>& steps,
                                                      const std::vector<int>& holders,
                                                      int shard_rank) {
  double most = -1;
  for (double s : steps) most = std::max(most, s);
  std::vector<int> donors, receivers;
  for (int holder : holders) {
    (steps[holder] == most ? donors : receivers).push_back(holder);
  }
  if (most < 0) {
    return absl::InternalError(
        absl::StrCat("no live rank holds a state to give: every rank of shard ", shard_rank,
                     "'s replicate group, and every other, is a replacement that has none"));
  }
  if (receivers.empty()) return std::vector<StateMove>();
  if (donors.empty()) {
    return absl::InternalError(absl::StrCat(
        "no live rank holds shard ", shard_rank, " at step ", most,
        ", which another shard's ranks committed: the shard group's commit vote split"));
  }
  std::vector<StateMove> moves;
  moves.reserve(receivers.size());
  for (size_t j = 0; j < receivers.size(); ++j) {
    moves.push_back({donors[(shard_rank + j) % donors.size()], receivers[j]});
  }
  return moves;
}

absl::Status SendState(Communicator& world, int receiver, const RankState& state,
                       const std::string& digest, RankPosition* position) {
  const std::string scaler = state.scaler.SerializeAsString();
  const std::vector<int64_t> layout = Layout(state, scaler.size());
  RETURN_IF_ERROR(world.Send(layout.data(), 2 * sizeof(int64_t), receiver));
  RETURN_IF_ERROR(world.Send(layout.data() + 2, (layout.size() - 2) * sizeof(int64_t), receiver));
  Phase(position, "sending parameters");
  std::vector<absl::Span<const char>> parameters;
  for (const std::vector<float>& shard : state.shards) parameters.push_back(Bytes(shard));
  RETURN_IF_ERROR(world.SendBuffers(parameters, receiver));
  Phase(position, "sending optimizer state");
  std::vector<absl::Span<const char>> rest;
  for (const auto& unit : state.optimizer) {
    for (const auto& [name, values] : unit) rest.push_back(Bytes(values));
  }
  const double counters[2] = {state.optimizer_steps, state.steps};
  rest.emplace_back(reinterpret_cast<const char*>(counters), sizeof(counters));
  rest.emplace_back(scaler.data(), scaler.size());
  rest.emplace_back(digest.data(), std::min(digest.size(), kDigestChars));
  return world.SendBuffers(rest, receiver);
}

namespace {

// ReceiveState once room is made (`prepared`, PrepareOptimizerState's).
absl::StatusOr<StateReceipt> ReceivePrepared(Communicator& world, int donor,
                                             const std::vector<bool>& prepared, RankState* state,
                                             RankPosition* position) {
  std::vector<int64_t> layout(2);
  RETURN_IF_ERROR(world.Recv(layout.data(), 2 * sizeof(int64_t), donor));
  const absl::Time start = Clock::Real().Now();  // the donor is sending: its rate from here
  if (layout[0] != static_cast<int64_t>(state->shards.size())) {
    return absl::InternalError(absl::StrCat("the donor's model has ", layout[0],
                                            " units, this rank's ", state->shards.size()));
  }
  if (layout[1] < 0 || layout[1] > kMaxScalerBytes) {
    return absl::InternalError(
        absl::StrCat("the donor's loss scaler state is ", layout[1], " bytes: not a scaler's"));
  }
  layout.resize(2 + 2 * state->shards.size());
  RETURN_IF_ERROR(world.Recv(layout.data() + 2, (layout.size() - 2) * sizeof(int64_t), donor));
  RETURN_IF_ERROR(AdoptLayout(layout, prepared, state));
  Phase(position, "receiving parameters");
  std::vector<absl::Span<char>> parameters;
  for (std::vector<float>& shard : state->shards) parameters.push_back(MutableBytes(shard));
  RETURN_IF_ERROR(world.RecvBuffers(parameters, donor));
  Phase(position, "receiving optimizer state");
  std::vector<absl::Span<char>> rest;
  for (auto& unit : state->optimizer) {
    for (auto& [name, values] : unit) rest.push_back(MutableBytes(values));
  }
  double counters[2] = {0, 0};
  std::string scaler(static_cast<size_t>(layout[1]), '\0');
  std::string sent(kDigestChars, '\0');
  rest.emplace_back(reinterpret_cast<char*>(counters), sizeof(counters));
  rest.emplace_back(scaler.data(), scaler.size());
  rest.emplace_back(sent.data(), sent.size());
  RETURN_IF_ERROR(world.RecvBuffers(rest, donor));
  state->optimizer_steps = counters[0];
  if (!state->scaler.ParseFromString(scaler)) {
    return absl::DataLossError("the donor's loss scaler state does not parse");
  }
  StateReceipt receipt;
  receipt.took = Clock::Real().Now() - start;
  state->steps = counters[1];  // the checksum covers it
  receipt.digest = StateDigest(*state);
  if (receipt.digest != sent) {
    state->steps = -1;
    return absl::DataLossError(absl::StrCat("the state from rank ", donor, " hashes to ",
                                            receipt.digest, " here, ", sent, " on the donor"));
  }
  receipt.bytes =
      state->FloatBytes() + static_cast<int64_t>(layout.size() * sizeof(int64_t) +
                                                 sizeof(counters) + scaler.size() + kDigestChars);
  return receipt;
}

}  // namespace

absl::StatusOr<StateReceipt> ReceiveState(Communicator& world, int donor,
                                          const std::vector<std::string>& optimizer_names,
                                          RankState* state, RankPosition* position) {
  // Until the whole state has arrived and checked, this rank holds none it may give or
  // train on: a transfer cut short leaves it behind every live rank, to be healed whole.
  state->steps = -1;
  const std::vector<bool> prepared = PrepareOptimizerState(optimizer_names, state);
  absl::StatusOr<StateReceipt> receipt = ReceivePrepared(world, donor, prepared, state, position);
  if (!receipt.ok()) {
    // The units made room for are left as they were found, without optimizer state: the
    // next epoch's donor may have none either (it never stepped).
    for (size_t u = 0; u < prepared.size(); ++u) {
      if (prepared[u]) state->optimizer[u].clear();
    }
  }
  return receipt;
}

}  // namespace shardwise
