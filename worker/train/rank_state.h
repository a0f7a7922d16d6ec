#ifndef SHARDWISE_WORKER_TRAIN_RANK_STATE_H_
#define SHARDWISE_WORKER_TRAIN_RANK_STATE_H_

// What a fault-tolerant rank carries across a membership change, in host memory: its own
// shards (its shard layout stays, as groups leave whole), their optimizer state, its
// counters and its loss scaler. A replacement rank takes all of it from a live rank that
// holds the same shard (state_transfer.h).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "proto/job.pb.h"

namespace shardwise {

// What a rank does after the steps it committed, in this order: the checkpoint due after
// them, the evaluation due after them, then the next step. A rank stands at its steps and
// the first of these it has not finished.
enum class AfterSteps : int32_t { kCheckpoint = 0, kEvaluation = 1, kNextStep = 2 };

struct RankState {
  std::vector<std::vector<float>> shards;  // per unit, as FsdpModel::ShardToHost gives it
  // Per unit: each optimizer state buffer (exp_avg, ...) of the unit's shard, in the
  // optimizer's order (Optimizer::StateNames).
  std::vector<std::vector<std::pair<std::string, std::vector<float>>>> optimizer;
  double optimizer_steps = 0;
  double steps = 0;  // the steps this rank committed
  // The first of what follows them that the rank has not finished. Not transferred nor in
  // the digest: every rank of an epoch takes the one the heal agrees on (AgreedNext).
  AfterSteps next = AfterSteps::kNextStep;
  v1::GradScalerState scaler;

  // Bytes of floats: the shards and their optimizer state.
  int64_t FloatBytes() const;
};

// XXH3-128, in hex (32 digits), of everything in `state`: a checksum, the same on two
// ranks when their states are bit for bit the same (a replacement's against its
// donor's), and different, but for a 2^-128 chance, when a transfer changed them. Not
// cryptographic: it guards against faults, not an adversary (the data plane's peers are
// the job's own ranks); at tens of GB/s it costs a heal next to nothing, where SHA-256
// would take longer than the transfer.
std::string StateDigest(const RankState& state);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_RANK_STATE_H_
