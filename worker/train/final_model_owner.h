#ifndef SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_
#define SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_

// Which job wrote a final model. Rank 0 writes its job's id and uid into the file's
// metadata ("shardwise.job", "shardwise.job_uid": contracts/job_identity.h), so that a later
// attempt of the same job may replace what an earlier one wrote: an attempt that finished while the
// coordinator was away past the re-attach grace is re-queued, and its successor must not refuse the
// job's own model as "exists already". A job still never replaces a file another job or a person
// wrote unless its spec says output.overwrite (the coordinator refuses such a spec at submission).

//
// The attempt goes in too ("shardwise.attempt"): an attempt cut off from the coordinator
// trains on while the job runs again elsewhere, and must not replace what the later
// attempt wrote (CheckNotSuperseded), even with output.overwrite.

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "contracts/job_identity.h"
#include "contracts/safetensors.h"

namespace shardwise {

inline constexpr char kFinalModelAttemptKey[] = "shardwise.attempt";

// The metadata naming a model's writer: `job` (nothing when its id is empty) and its
// `attempt`.
Metadata WriterMetadata(const JobIdentity& job, int32_t attempt);

// FAILED_PRECONDITION when `path` is a model whose metadata names `job` and an attempt
// later than `attempt`: this attempt was superseded. OK otherwise (no file, another
// writer, another state file's job of the same id, an earlier attempt's, or a model of a
// release that named no attempt).
absl::Status CheckNotSuperseded(const std::string& path, const JobIdentity& job, int32_t attempt);

// Whether `path` is a safetensors file whose metadata names `job` as its writer, its id
// and uid both (false for an empty id, a missing, unreadable or irregular file, or
// another writer). Reads the file's header only. Callers pass a path the path policy
// has checked.
bool WrittenByJob(const std::string& path, const JobIdentity& job);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_FINAL_MODEL_OWNER_H_
