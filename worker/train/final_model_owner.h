#ifndef SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_
#define SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_

// Which job wrote a final model. Rank 0 writes its job's id into the file's metadata
// ("shardwise.job"), so that a later attempt of the same job may replace what an earlier
// one wrote: an attempt that finished while the coordinator was away past the re-attach
// grace is re-queued, and its successor must not refuse the job's own model as "exists
// already". A job still never replaces a file another job or a person wrote unless its
// spec says output.overwrite (the coordinator refuses such a spec at submission).

#include <string>

namespace shardwise {

inline constexpr char kFinalModelJobKey[] = "shardwise.job";

// Whether `path` is a safetensors file whose metadata names `job_id` as its writer
// (false for an empty id, a missing, unreadable or irregular file, or another writer).
// Reads the file's header only. Callers pass a path the path policy has checked.
bool WrittenByJob(const std::string& path, const std::string& job_id);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_
