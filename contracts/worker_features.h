#ifndef SHARDWISE_CONTRACTS_WORKER_FEATURES_H_
#define SHARDWISE_CONTRACTS_WORKER_FEATURES_H_

// What a worker's release enforces beyond what every release does, named in its
// registration (v1::RegisterWorkerRequest.features), so that the coordinator places on it
// only the jobs it handles as their submitters were promised. A worker of an older
// release names none and is given no job that needs one: during a rolling upgrade such
// jobs wait for upgraded workers rather than run where a promise would not hold.

namespace shardwise {

// The worker checks a job's paths against its submitter's folders too (the tokens
// file's input_paths and output_paths, sent as PathPolicy.submitter), not only against
// the coordinator's roots.
inline constexpr char kFeatureSubmitterFolders[] = "submitter-folders";

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_WORKER_FEATURES_H_
