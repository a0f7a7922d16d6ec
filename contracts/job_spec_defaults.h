#ifndef SHARDWISE_CONTRACTS_JOB_SPEC_DEFAULTS_H_
#define SHARDWISE_CONTRACTS_JOB_SPEC_DEFAULTS_H_

#include "proto/job_spec.pb.h"

namespace shardwise {

// Fills every unset field of a valid spec with its default (PyTorch's where PyTorch has
// one), so that the coordinator stores, and workers run, one explicit configuration.
// docs/job-spec.md lists the defaults.
void ApplyJobSpecDefaults(v1::JobSpec* spec);

inline constexpr int64_t kDefaultSyntheticSamples = 4096;
inline constexpr int32_t kDefaultEvalBatches = 4;
// rendezvous.join_timeout_seconds: long enough for a worker to check the job's files and
// memory and connect, short enough that a rank that never comes is found well before the
// data plane's own timeout (a minute by default).
inline constexpr int32_t kDefaultJoinTimeoutSeconds = 30;
// The spec's join timeout, or the default for a spec stored before it had one.
inline int32_t JoinTimeoutSeconds(const v1::JobSpec& spec) {
  const int32_t seconds = spec.rendezvous().join_timeout_seconds();
  return seconds > 0 ? seconds : kDefaultJoinTimeoutSeconds;
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_SPEC_DEFAULTS_H_
