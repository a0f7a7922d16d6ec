#ifndef SHARDWISE_CONTRACTS_JOB_SUMMARY_H_
#define SHARDWISE_CONTRACTS_JOB_SUMMARY_H_

// A job's summary: what `get jobs` lists, and what the coordinator keeps in memory of a
// job that ended.

#include "proto/job.pb.h"

namespace shardwise {

v1::JobSummary Summarize(const v1::Job& job);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_JOB_SUMMARY_H_
