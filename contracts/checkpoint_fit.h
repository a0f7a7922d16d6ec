#ifndef SHARDWISE_CONTRACTS_CHECKPOINT_FIT_H_
#define SHARDWISE_CONTRACTS_CHECKPOINT_FIT_H_

// A checkpoint against the job that loads it: a job resuming from its own or starting
// from init.checkpoint_dir's. The coordinator checks the newest checkpoint of
// init.checkpoint_dir at submission, and a worker again as it loads one (a newer one may
// have been written since): one rule for both.

#include <string>

#include "absl/status/status.h"
#include "contracts/fsdp_layout.h"
#include "proto/checkpoint.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise::fsdp {

// OK if the manifest of checkpoint `folder` is of `spec`'s model and wrap policy
// (INVALID_ARGUMENT naming what differs), names the shard files its writer names, and
// lists `layout`'s units with their sizes (DATA_LOSS otherwise). `spec` is the job as
// admitted (defaults applied, as the writer's manifest holds them); `layout` is its.
absl::Status CheckCheckpointFits(const std::string& folder, const v1::CheckpointManifest& manifest,
                                 const v1::JobSpec& spec, const FlatLayout& layout);

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_CONTRACTS_CHECKPOINT_FIT_H_
