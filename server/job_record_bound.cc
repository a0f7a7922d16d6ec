#include "server/job_record_bound.h"

namespace shardwise {
namespace {

// Drops the items of `items` between its first `first` and its newest `newest`; returns
// how many it dropped.
template <typename Item>
int DropBetween(google::protobuf::RepeatedPtrField<Item>* items, int first, int newest) {
  const int excess = items->size() - first - newest;
  if (excess <= 0) return 0;
  items->DeleteSubrange(first, excess);
  return excess;
}

}  // namespace

void BoundJobEvents(v1::Job* job) {
  const int dropped = DropBetween(job->mutable_events(), kFirstJobEventsKept, kNewestJobEventsKept);
  if (dropped == 0) return;
  job->set_events_omitted(job->events_omitted() + dropped);
  job->set_events_omitted_after(kFirstJobEventsKept);
}

void BoundMembershipHistory(v1::Job* job) {
  const int dropped = DropBetween(job->mutable_membership_history(), kFirstMembershipEpochsKept,
                                  kNewestMembershipEpochsKept);
  if (dropped == 0) return;
  job->set_membership_epochs_omitted(job->membership_epochs_omitted() + dropped);
  job->set_membership_epochs_omitted_after(kFirstMembershipEpochsKept);
}

}  // namespace shardwise
