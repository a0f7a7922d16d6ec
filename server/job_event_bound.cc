#include "server/job_event_bound.h"

namespace shardwise {

void BoundJobEvents(v1::Job* job) {
  const int excess = job->events_size() - kFirstJobEventsKept - kNewestJobEventsKept;
  if (excess <= 0) return;
  job->mutable_events()->DeleteSubrange(kFirstJobEventsKept, excess);
  job->set_events_omitted(job->events_omitted() + excess);
  job->set_events_omitted_after(kFirstJobEventsKept);
}

}  // namespace shardwise
