#ifndef SHARDWISE_SERVER_JOB_EVENT_BOUND_H_
#define SHARDWISE_SERVER_JOB_EVENT_BOUND_H_

// How many of a job's events its record carries. The state file keeps every event (until
// the job is compacted); the record the coordinator holds, copies on every report and
// hands to every watch keeps the first ones (how the job began) and the newest, and
// counts the rest (Job.events_omitted, after Job.events_omitted_after of them): a
// fault-tolerant job that heals for weeks adds a dozen events per heal.

#include <cstdint>

#include "proto/job.pb.h"

namespace shardwise {

inline constexpr int kFirstJobEventsKept = 20;
inline constexpr int kNewestJobEventsKept = 1000;

// Drops the events of `job` between its first kFirstJobEventsKept and its newest
// kNewestJobEventsKept, adding them to its count of omitted events.
void BoundJobEvents(v1::Job* job);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_EVENT_BOUND_H_
