#include "server/job_record_bound.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

void AddEvents(v1::Job* job, int first, int count) {
  for (int i = first; i < first + count; ++i) job->add_events()->set_message(absl::StrCat(i));
}

TEST(JobRecordBound, KeepsTheFirstAndTheNewestAndCountsTheRest) {
  v1::Job job;
  AddEvents(&job, 0, kFirstJobEventsKept + kNewestJobEventsKept);
  BoundJobEvents(&job);
  EXPECT_EQ(job.events_size(), kFirstJobEventsKept + kNewestJobEventsKept);  // within: kept
  EXPECT_EQ(job.events_omitted(), 0);
  AddEvents(&job, kFirstJobEventsKept + kNewestJobEventsKept, 5);
  BoundJobEvents(&job);
  ASSERT_EQ(job.events_size(), kFirstJobEventsKept + kNewestJobEventsKept);
  EXPECT_EQ(job.events_omitted(), 5);
  EXPECT_EQ(job.events_omitted_after(), kFirstJobEventsKept);
  EXPECT_EQ(job.events(kFirstJobEventsKept - 1).message(), absl::StrCat(kFirstJobEventsKept - 1));
  EXPECT_EQ(job.events(kFirstJobEventsKept).message(), absl::StrCat(kFirstJobEventsKept + 5));
  EXPECT_EQ(job.events(job.events_size() - 1).message(),
            absl::StrCat(kFirstJobEventsKept + kNewestJobEventsKept + 4));
  // One more at a time, as the coordinator adds them: the count goes on.
  AddEvents(&job, kFirstJobEventsKept + kNewestJobEventsKept + 5, 1);
  BoundJobEvents(&job);
  EXPECT_EQ(job.events_omitted(), 6);
  EXPECT_EQ(job.events(kFirstJobEventsKept).message(), absl::StrCat(kFirstJobEventsKept + 6));
}

TEST(JobRecordBound, KeepsTheFirstAndTheNewestMembershipEpochsAndCountsTheRest) {
  v1::Job job;
  const int kept = kFirstMembershipEpochsKept + kNewestMembershipEpochsKept;
  for (int epoch = 1; epoch <= kept + 7; ++epoch) {
    job.add_membership_history()->set_epoch(epoch);
    BoundMembershipHistory(&job);  // as the coordinator adds them, one at a time
  }
  ASSERT_EQ(job.membership_history_size(), kept);
  EXPECT_EQ(job.membership_epochs_omitted(), 7);
  EXPECT_EQ(job.membership_epochs_omitted_after(), kFirstMembershipEpochsKept);
  EXPECT_EQ(job.membership_history(kFirstMembershipEpochsKept - 1).epoch(),
            kFirstMembershipEpochsKept);
  EXPECT_EQ(job.membership_history(kFirstMembershipEpochsKept).epoch(),
            kFirstMembershipEpochsKept + 8);
  EXPECT_EQ(job.membership_history(kept - 1).epoch(), kept + 7);  // the newest is kept
  EXPECT_EQ(job.events_omitted(), 0);  // the events' count is theirs alone
}

}  // namespace
}  // namespace shardwise
