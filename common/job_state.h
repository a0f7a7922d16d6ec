#ifndef SHARDWISE_COMMON_JOB_STATE_H_
#define SHARDWISE_COMMON_JOB_STATE_H_

#include "proto/job.pb.h"

namespace shardwise {

// SUCCEEDED, FAILED and CANCELLED are final: nothing moves a job out of them.
inline bool IsTerminal(v1::JobState state) {
  return state == v1::SUCCEEDED || state == v1::FAILED || state == v1::CANCELLED;
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_JOB_STATE_H_
