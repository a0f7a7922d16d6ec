#ifndef SHARDWISE_SERVER_JOB_RECORD_BOUND_H_
#define SHARDWISE_SERVER_JOB_RECORD_BOUND_H_

// How much of a job's history its record carries. The record the coordinator holds,
// copies on every report, writes to the state file and hands to every watch keeps the
// first entries of each long list (how the job began) and the newest, and counts the
// rest: a fault-tolerant job that heals for weeks adds a dozen events and a membership
// epoch per heal.
//  - Events (Job.events_omitted, after Job.events_omitted_after of them): the state file
//    keeps every event in a table of its own (until the job is compacted).
//  - Membership epochs (Job.membership_epochs_omitted, after
//    Job.membership_epochs_omitted_after of them): those left out are gone, but each was
//    decided with an event naming its cause, which the state file keeps.

#include <cstdint>

#include "proto/job.pb.h"

namespace shardwise {

inline constexpr int kFirstJobEventsKept = 20;
inline constexpr int kNewestJobEventsKept = 1000;
inline constexpr int kFirstMembershipEpochsKept = 10;
inline constexpr int kNewestMembershipEpochsKept = 200;

// Drops the events of `job` between its first kFirstJobEventsKept and its newest
// kNewestJobEventsKept, adding them to its count of omitted events.
void BoundJobEvents(v1::Job* job);

// Drops the membership epochs of `job` between its first kFirstMembershipEpochsKept and its
// newest kNewestMembershipEpochsKept, adding them to its count of omitted epochs.
void BoundMembershipHistory(v1::Job* job);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_JOB_RECORD_BOUND_H_
