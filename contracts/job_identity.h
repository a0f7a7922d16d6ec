#ifndef SHARDWISE_CONTRACTS_JOB_IDENTITY_H_
#define SHARDWISE_CONTRACTS_JOB_IDENTITY_H_

// Which job wrote a checkpoint step or a final model. A job's id ("job-7") is unique
// within one state file only: a coordinator started over from an empty one numbers its
// jobs from job-1 again, and two clusters may write to the same storage. So what a job
// writes names its uid too (Job.uid: 128 random bits given at submission), and a job takes
// a file as its own (to resume from, to prune, to replace) only when both agree. A job
// admitted by a release before uids has none; it and the files it wrote are known by
// their id alone, and no job with a uid takes them as its own.

#include <string>

#include "contracts/safetensors.h"
#include "proto/checkpoint.pb.h"
#include "proto/job.pb.h"

namespace shardwise {

// The safetensors metadata keys naming a file's writer: its job's id and uid (a final
// model's and each checkpoint shard's).
inline constexpr char kWriterJobKey[] = "shardwise.job";
inline constexpr char kWriterJobUidKey[] = "shardwise.job_uid";

struct JobIdentity {
  std::string id;
  std::string uid;  // empty: a job admitted by a release before uids

  bool operator==(const JobIdentity& other) const { return id == other.id && uid == other.uid; }
  bool operator!=(const JobIdentity& other) const { return !(*this == other); }
};

JobIdentity IdentityOf(const v1::Job& job);
// The writer a checkpoint manifest names.
JobIdentity ManifestWriter(const v1::CheckpointManifest& manifest);
// The writer a file's metadata names (an entry it lacks: empty).
JobIdentity MetadataWriter(const Metadata& metadata);
// The metadata entries naming `writer` (the uid's only when it has one).
Metadata WriterEntries(const JobIdentity& writer);

// `other` as `self`'s messages name it: "job job-3", or, when it has `self`'s id,
// "another job job-1 (uid 3f2a1b0c..., of another state file)".
std::string OtherJobName(const JobIdentity& other, const JobIdentity& self);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_IDENTITY_H_
