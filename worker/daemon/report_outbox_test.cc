#include "worker/daemon/report_outbox.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::AttemptReport Report(v1::AttemptPhase phase, int64_t step = 0) {
  v1::AttemptReport report;
  report.set_job_id("job-1");
  report.set_attempt(1);
  report.set_phase(phase);
  report.mutable_progress()->set_step(step);
  return report;
}

std::vector<v1::AttemptPhase> Phases(const std::vector<v1::AttemptReport>& reports) {
  std::vector<v1::AttemptPhase> phases;
  phases.reserve(reports.size());
  for (const auto& r : reports) phases.push_back(r.phase());
  return phases;
}

TEST(ReportOutbox, HoldsReportsInOrderKeepingOnlyTheNewestProgress) {
  ReportOutbox outbox;
  outbox.StartAttempt();
  outbox.Hold(Report(v1::PROGRESS, 1));
  outbox.Hold(Report(v1::ORDER_CHANGED, 2));
  outbox.Hold(Report(v1::PROGRESS, 3));
  outbox.Hold(Report(v1::PROGRESS, 4));
  auto sent = outbox.Release(/*reattached=*/true);
  ASSERT_EQ(Phases(sent), (std::vector<v1::AttemptPhase>{v1::ORDER_CHANGED, v1::PROGRESS}));
  EXPECT_EQ(sent[1].progress().step(), 4);
  EXPECT_TRUE(outbox.Release(true).empty());  // released once
}

// A coordinator that crashed may not have acted on a final report it received: the
// final report goes again to the coordinator that re-attaches the attempt.
TEST(ReportOutbox, TheFinalReportIsSentAgainOnReattach) {
  ReportOutbox outbox;
  outbox.StartAttempt();
  EXPECT_FALSE(outbox.ended());
  outbox.Sent(Report(v1::PROGRESS, 9));
  outbox.Sent(Report(v1::COMPLETED, 10));
  EXPECT_TRUE(outbox.ended());
  EXPECT_EQ(Phases(outbox.Release(true)), (std::vector<v1::AttemptPhase>{v1::COMPLETED}));
  // Held, it is sent once, in its place.
  outbox.StartAttempt();
  outbox.Hold(Report(v1::PROGRESS, 1));
  outbox.Hold(Report(v1::ABORTED, 2));
  EXPECT_EQ(Phases(outbox.Release(true)),
            (std::vector<v1::AttemptPhase>{v1::PROGRESS, v1::ABORTED}));
  // A new attempt forgets the old one's.
  outbox.StartAttempt();
  EXPECT_FALSE(outbox.ended());
  EXPECT_TRUE(outbox.Release(true).empty());
}

// A session that breaks again while the held reports are sent on it: the one it could
// not take and those after it wait, in order, for the next session.
TEST(ReportOutbox, WhatANewSessionCouldNotTakeIsHeldAgain) {
  ReportOutbox outbox;
  outbox.StartAttempt();
  outbox.Hold(Report(v1::JOINED, 1));
  outbox.Hold(Report(v1::ORDER_CHANGED, 2));
  outbox.Hold(Report(v1::PROGRESS, 3));
  outbox.Hold(Report(v1::ABORTED, 4));
  std::vector<v1::AttemptReport> written;
  outbox.Resend(/*reattached=*/true, [&](const v1::AttemptReport& report) {
    if (written.size() == 1) return false;
    written.push_back(report);
    return true;
  });
  EXPECT_EQ(Phases(written), (std::vector<v1::AttemptPhase>{v1::JOINED}));
  EXPECT_EQ(Phases(outbox.Release(true)),
            (std::vector<v1::AttemptPhase>{v1::ORDER_CHANGED, v1::PROGRESS, v1::ABORTED}));
}

TEST(ReportOutbox, NotReattachedDropsWhatIsHeld) {
  ReportOutbox outbox;
  outbox.StartAttempt();
  outbox.Hold(Report(v1::ORDER_RECORDED));
  outbox.Hold(Report(v1::COMPLETED));
  EXPECT_TRUE(outbox.Release(/*reattached=*/false).empty());
  EXPECT_EQ(outbox.held(), 0u);
}

TEST(ReportOutbox, HoldsAtMostABoundedNumberButNeverDropsTheFinalReport) {
  ReportOutbox outbox;
  outbox.StartAttempt();
  outbox.Hold(Report(v1::ABORTED));
  for (size_t i = 0; i < 2 * ReportOutbox::kMaxHeld; ++i) outbox.Hold(Report(v1::ORDER_CHANGED));
  EXPECT_EQ(outbox.held(), ReportOutbox::kMaxHeld);
  auto sent = outbox.Release(true);
  EXPECT_EQ(sent.front().phase(), v1::ABORTED);
}

}  // namespace
}  // namespace shardwise
