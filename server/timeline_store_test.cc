#include "server/timeline_store.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::vector<v1::Span> Spans(int n, int64_t first_start) {
  std::vector<v1::Span> spans(n);
  for (int i = 0; i < n; ++i) spans[i].set_start_us(first_start + i);
  return spans;
}

TEST(TimelineStore, KeepsTheNewestSpansPerRankAndCountsTheRest) {
  TimelineStore store(/*spans_per_rank=*/3);
  store.Add("job-1", 1, 0, "w0", Spans(2, 0), 0);
  store.Add("job-1", 1, 0, "w0", Spans(2, 10), 5);
  store.Add("job-1", 1, 1, "w1", Spans(1, 0), 0);
  const v1::Timeline timeline = store.Get("job-1");
  ASSERT_EQ(timeline.ranks_size(), 2);
  EXPECT_EQ(timeline.ranks(0).spans_size(), 3);
  EXPECT_EQ(timeline.ranks(0).spans(0).start_us(), 1);  // the oldest was dropped
  EXPECT_EQ(timeline.ranks(0).dropped(), 6);            // 5 by the worker, 1 here
  EXPECT_EQ(timeline.ranks(1).worker_id(), "w1");
}

TEST(TimelineStore, TheRanksOfAJobShareItsBound) {
  TimelineStore store(/*spans_per_rank=*/100, /*spans_per_job=*/8);
  store.Add("job-1", 1, 0, "w0", Spans(8, 0), 0);
  EXPECT_EQ(store.Get("job-1").ranks(0).spans_size(), 8);
  store.Add("job-1", 1, 1, "w1", Spans(8, 0), 0);  // two ranks: 4 each
  store.Add("job-1", 1, 0, "w0", Spans(1, 100), 0);
  const v1::Timeline timeline = store.Get("job-1");
  EXPECT_EQ(timeline.ranks(0).spans_size(), 4);
  EXPECT_EQ(timeline.ranks(0).spans(3).start_us(), 100);
  EXPECT_EQ(timeline.ranks(0).dropped(), 5);
  EXPECT_EQ(timeline.ranks(1).spans_size(), 4);
}

TEST(TimelineStore, ABoundedCopyKeepsEachRanksNewestShareAndCountsTheRest) {
  TimelineStore store;
  store.Add("job-1", 1, 0, "w0", Spans(10, 0), 2);
  store.Add("job-1", 1, 1, "w1", Spans(3, 100), 0);
  const v1::Timeline bounded = store.Get("job-1", /*max_spans=*/8);  // 4 a rank
  ASSERT_EQ(bounded.ranks_size(), 2);
  ASSERT_EQ(bounded.ranks(0).spans_size(), 4);
  EXPECT_EQ(bounded.ranks(0).spans(0).start_us(), 6);  // the newest four, oldest first
  EXPECT_EQ(bounded.ranks(0).spans(3).start_us(), 9);
  EXPECT_EQ(bounded.ranks(0).dropped(), 2 + 6);
  EXPECT_EQ(bounded.ranks(1).spans_size(), 3);  // under its share: all of them
  EXPECT_EQ(bounded.ranks(1).dropped(), 0);
  EXPECT_EQ(store.Get("job-1", /*max_spans=*/1).ranks(1).spans_size(), 1);  // at least one
  EXPECT_EQ(store.Get("job-1").ranks(0).spans_size(), 10);  // the store keeps them all
}

TEST(TimelineStore, ANewAttemptReplacesTheOldAndLateSpansAreIgnored) {
  TimelineStore store;
  store.Add("job-1", 1, 0, "w0", Spans(2, 0), 0);
  store.Add("job-1", 2, 0, "w3", Spans(1, 100), 0);
  store.Add("job-1", 1, 1, "w1", Spans(4, 0), 0);  // late, from attempt 1
  const v1::Timeline timeline = store.Get("job-1");
  EXPECT_EQ(timeline.attempt(), 2);
  ASSERT_EQ(timeline.ranks_size(), 1);
  EXPECT_EQ(timeline.ranks(0).spans(0).start_us(), 100);
}

// Jobs share the total: each one fed keeps its newest share (its last report alone
// was kept with more jobs running than a count bound allowed); past the total, the job
// fed least recently goes.
TEST(TimelineStore, JobsShareTheTotalAndTheLeastRecentlyFedGoesPastIt) {
  TimelineStore store(/*spans_per_rank=*/100, /*spans_per_job=*/100, /*spans_total=*/12);
  for (const char* job : {"job-1", "job-2", "job-3"}) store.Add(job, 1, 0, "w0", Spans(4, 0), 0);
  for (int report = 1; report <= 3; ++report) {
    for (const char* job : {"job-1", "job-2", "job-3"}) {
      store.Add(job, 1, 0, "w0", Spans(2, int64_t{100} * report), 0);
    }
  }
  for (const char* job : {"job-1", "job-2", "job-3"}) {
    const v1::Timeline timeline = store.Get(job);
    ASSERT_EQ(timeline.ranks_size(), 1) << job;
    EXPECT_EQ(timeline.ranks(0).spans_size(), 4) << job;  // 12 shared by three
    EXPECT_EQ(timeline.ranks(0).spans(0).start_us(), 200) << job;
    EXPECT_EQ(timeline.ranks(0).dropped(), 6) << job;
  }
  store.Add("job-4", 1, 0, "w0", Spans(4, 0), 0);  // over the total: job-1 goes
  EXPECT_EQ(store.Get("job-1").ranks_size(), 0);
  EXPECT_EQ(store.Get("job-2").ranks_size(), 1);
  EXPECT_EQ(store.Get("job-4").ranks(0).spans_size(), 3);  // 12 shared by four
}

}  // namespace
}  // namespace shardwise
