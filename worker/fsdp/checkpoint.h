#ifndef SHARDWISE_WORKER_FSDP_CHECKPOINT_H_
#define SHARDWISE_WORKER_FSDP_CHECKPOINT_H_

// Sharded checkpoints (proto/checkpoint.proto describes the layout): every rank of the
// first replicate group writes its shards, rank 0 writes the manifest last. Loading
// reads the reader's own shard of each unit's flat parameters and optimizer state from
// the shards, so a checkpoint can be loaded by any world size and strategy.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "contracts/checkpoint_files.h"
#include "contracts/fsdp_layout.h"
#include "contracts/job_identity.h"
#include "proto/checkpoint.pb.h"
#include "proto/job_spec.pb.h"
#include "worker/fsdp/fsdp_model.h"
#include "worker/fsdp/optimizer.h"

namespace shardwise::fsdp {

std::string OptimizerKind(const v1::OptimizerSpec& optimizer);

// Who writes a checkpoint: the job, and its attempt. An attempt whose worker lost the
// coordinator trains on (the coordinator may come back), so after a partition the job's
// next attempt may run beside it on other workers, writing to the same folder. Each file
// names its attempt, so that a step whose files name different ones is not taken for a
// checkpoint, and an attempt that finds a later one's step there stops writing
// (FAILED_PRECONDITION, "superseded").
// The job is known by its id and uid both (contracts/job_identity.h): another state
// file's job of the same id is another job.
struct CheckpointAuthor {
  std::string job_id;
  int32_t attempt = 0;
  std::string job_uid;  // Job.uid; empty for a job admitted before uids

  JobIdentity job() const { return JobIdentity{job_id, job_uid}; }
  // Whether `manifest` names this author's job (any attempt of it).
  bool SameJob(const v1::CheckpointManifest& manifest) const {
    return ManifestWriter(manifest) == job();
  }
};

// The bytes of the tensors WriteCheckpointShard writes of this rank's shards (its file
// but the header).
uint64_t CheckpointShardBytes(const FsdpModel& model, const Optimizer& optimizer);

// This rank's shards of parameters and optimizer state, into the step's folder. Only
// ranks of the first replicate group write (the others hold the same shards).
absl::Status WriteCheckpointShard(const std::string& dir, int64_t step,
                                  const CheckpointAuthor& author, const FsdpModel& model,
                                  const Optimizer& optimizer);

// The manifest, written atomically once every shard is on disk (the caller's barrier),
// unless a later attempt of the job wrote a step in `dir` (FAILED_PRECONDITION).
// `scaler` is the loss scaler's state, kept in the manifest when the job scales its loss.
absl::Status WriteCheckpointManifest(const std::string& dir, int64_t step,
                                     const CheckpointAuthor& author, const v1::JobSpec& spec,
                                     const FsdpModel& model, const Optimizer& optimizer,
                                     const v1::GradScalerState* scaler = nullptr);

// After the manifest of `step` is written (output.keep_checkpoints): removes the job's
// step folders in `dir` before `step` but the newest `keep` - 1 complete ones, so that
// `keep` checkpoints remain with this one; returns how many it removed (none when `keep`
// is 0: every one kept). The job's steps that are damaged (shards of two attempts, a
// shard missing: DATA_LOSS) go too; one this worker may not read is left. Left alone: a step folder
// without a manifest (a write cut short: no job is known to own it), another job's, and the steps
// after `step` (an earlier attempt's, which this attempt writes again as it gets there). Each
// folder is renamed out of sight first, then removed, never through a link (common/safe_write.h);
// what a removal cut short left is removed at the next call. Nothing is removed unless
// `step` is a complete checkpoint of the job (another attempt's or job's shards mixed into
// it since would leave none to resume from), once a later attempt of the job wrote in
// `dir` (FAILED_PRECONDITION, "superseded": it may be reading any step) or when a step
// cannot be read now (UNAVAILABLE).
absl::StatusOr<int> RemoveOlderCheckpoints(const std::string& dir, int64_t step,
                                           const CheckpointAuthor& author, int keep);

struct LoadedCheckpoint {
  std::string folder;  // where it was read from, for messages
  v1::CheckpointManifest manifest;
  // Per unit, the reader's shard of its flat parameters and, per state name, of its
  // optimizer state: its plan's shard_numel elements each, zeros past the unit's end
  // (FsdpModel::CreateFromShards takes the parameters as they are).
  std::vector<std::vector<float>> params;
  std::vector<std::map<std::string, std::vector<float>>> optimizer_state;
};

// Loads a checkpoint folder for `spec`, read by a rank of `plan`: INVALID_ARGUMENT if its
// model or wrap policy differ, DATA_LOSS if a shard is missing or malformed, names
// another job or attempt than the manifest, or holds some of the states of `spec`'s
// optimizer for a unit but not all. The optimizer state is read only when an optimizer
// of `spec`'s kind wrote it (none otherwise). Only what the rank keeps is read, its own shard of
// the parameters and of the optimizer state, cut from the files that hold it, so any
// world size and strategy can load any checkpoint of the model, and a rank's host memory
// holds its shards (the whole model only where its shard group is of one: NO_SHARD).
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& folder, const v1::JobSpec& spec,
                                                const ShardingPlan& plan);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_CHECKPOINT_H_
