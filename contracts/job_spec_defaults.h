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

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_SPEC_DEFAULTS_H_
