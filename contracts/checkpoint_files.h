#ifndef SHARDWISE_CONTRACTS_CHECKPOINT_FILES_H_
#define SHARDWISE_CONTRACTS_CHECKPOINT_FILES_H_

// The files of a checkpoint folder as they lie (proto/checkpoint.proto describes them):
// step folders "step-NNNNNNNN", each holding a safetensors file per shard-group rank
// ("rank-SSSSS.safetensors": tensors "unitU.param", "unitU.<optimizer state>", and the
// writing job and attempt in its metadata) and, written last, "manifest.json". The worker's
// writer, reader and pruning of old steps (worker/fsdp/checkpoint.h) and the
// coordinator's check of init.checkpoint_dir at submission share these names and reads.
//
// Files inside a checkpoint folder are read as untrusted (common/untrusted_file.h): the
// path policy checked the folder a spec names, not the names inside it, so neither a step
// folder nor a file in it is read through a link (one planted there could lead to another
// job's checkpoint, or be swapped in after a check), nor does a FIFO block. Each is
// opened beneath the checkpoint folder, component by component.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/untrusted_file.h"
#include "contracts/job_identity.h"
#include "contracts/safetensors.h"
#include "proto/checkpoint.pb.h"

namespace shardwise::fsdp {

inline constexpr char kCheckpointManifest[] = "manifest.json";
// The shard files' metadata key naming the attempt that wrote them; the job is named as
// every file's writer is (contracts/job_identity.h: its id and uid).
inline constexpr char kCheckpointAttemptKey[] = "shardwise.attempt";

std::string CheckpointFolder(const std::string& dir, int64_t step);
std::string CheckpointShardFile(int shard_rank);
std::string CheckpointTensorName(int unit, const std::string& what);

// The step folders of `dir` by step (named as CheckpointFolder names them, "step-00000005";
// another spelling of a step, "step-5", is passed over); none if there is no `dir`. The
// folder is opened as the job's paths are (no link anywhere): one put in its path since
// the check fails the attempt, rather than read as "no checkpoint".
absl::StatusOr<std::map<int64_t, std::string>> CheckpointSteps(const std::string& dir);

// The manifest of step folder `folder`: NOT_FOUND (none yet: the manifest is written
// last), INVALID_ARGUMENT (a link, not a folder or not a regular file), PERMISSION_DENIED
// (its permissions keep this process out), UNAVAILABLE (this host's trouble), DATA_LOSS
// (not a manifest).
absl::StatusOr<v1::CheckpointManifest> ReadCheckpointManifest(const std::string& folder);

// One shard file of a step, open, with its header: what is read at the header's offsets
// comes from the file whose header was checked.
struct CheckpointShard {
  std::string name;
  UntrustedFile file;
  SafetensorsIndex index;
};

// Opens shard file `name` of step folder `folder` and reads its header. A link or a file
// that is not regular stays INVALID_ARGUMENT, this host's trouble UNAVAILABLE (not the
// job's to repeat), a file whose permissions keep this process out PERMISSION_DENIED
// (no damage: another host or user may read it); the rest is damage (DATA_LOSS), each
// naming the folder.
absl::StatusOr<CheckpointShard> OpenCheckpointShard(const std::string& folder,
                                                    const std::string& name);
// The same mapping for an error reading an open shard.
absl::Status CheckpointShardError(const std::string& folder, const absl::Status& read);

// OK unless `shard` names another job or attempt than `manifest` (DATA_LOSS): two jobs
// sharing a checkpoint folder, or two attempts of one job, wrote the step; a shard of a
// later attempt than the manifest's is that attempt rewriting the step (it resumed from
// an older one), cut short: StepBeingRewritten says so of the error. A manifest
// without an attempt (attempt 0), or a shard without a job or an attempt, was written by
// a release that did not record it (a job's workers may be of two releases during an
// upgrade) and is taken as it is.
absl::Status CheckShardAuthor(const std::string& folder, const v1::CheckpointManifest& manifest,
                              const CheckpointShard& shard);
inline constexpr char kStepBeingRewritten[] = "shardwise.dev/checkpoint-step-being-rewritten";
bool StepBeingRewritten(const absl::Status& check);

// OK if `manifest` (of step folder `folder`) lists as many shard files as its shard group,
// each by the name its writer gives it (CheckpointShardFile), DATA_LOSS otherwise: only
// those names are opened, so a crafted manifest cannot make a reader open files outside
// the folder, nor any number of them.
absl::Status CheckShardFileNames(const std::string& folder, const v1::CheckpointManifest& manifest);

// Whether the step folder `folder` of step `step`, holding `manifest`, is a checkpoint: its
// manifest names its step and its shard files by their names (CheckShardFileNames), and
// each can be opened, one at a time, and names the manifest's job and attempt. UNAVAILABLE when
// this host could not read one now (not to be passed over for an NFS hiccup),
// PERMISSION_DENIED when this process may not; another error when it is not.
absl::Status CheckCheckpointComplete(const std::string& folder, int64_t step,
                                     const v1::CheckpointManifest& manifest);

// A complete checkpoint as the search found it: its step, its folder and the manifest read
// there. The manifest is the one checked: reading it again could find the step removed
// since (a producer's keep_checkpoints) and take that for no checkpoint at all.
struct FoundCheckpoint {
  int64_t step = 0;
  std::string folder;
  v1::CheckpointManifest manifest;
};

// The newest complete checkpoint in `dir`, of any job; NOT_FOUND if there is none (or no
// folder `dir`). A step folder counts when its manifest names its step and every shard file can be
// opened and names the manifest's job and attempt (CheckCheckpointComplete). A step this host could
// not read now (UNAVAILABLE) or this process may not read (PERMISSION_DENIED) is not passed over:
// the error is returned, since the reader would otherwise start from an older step, or from its
// seed, without a word. `dir` is canonical, as the path checks leave it: a link in it is refused
// (INVALID_ARGUMENT).
absl::StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& dir);
// A step newer than the one found that was passed over although its manifest is there
// (written last, once every shard was): damaged since. A step without a manifest (a write
// cut short), one a later attempt was rewriting (StepBeingRewritten) and one removed
// meanwhile are passed over without being counted.
struct PassedOverStep {
  int64_t step = 0;
  std::string why;  // the check's message
};
// As FindLatestCheckpoint, among the steps `writer` wrote only (its id and uid both,
// contracts/job_identity.h); the steps of its own it passed over on the way (newest
// first), with why, into `passed_over` where given. A step whose manifest cannot be
// parsed counts as the writer's (a job's checkpoint_dir is its own).
absl::StatusOr<FoundCheckpoint> FindLatestCheckpointOf(
    const std::string& dir, const JobIdentity& writer,
    std::vector<PassedOverStep>* passed_over = nullptr);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_CONTRACTS_CHECKPOINT_FILES_H_
