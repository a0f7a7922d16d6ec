#include "server/stall_detector.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1'800'000'000);

// A rank at `step`, in `phase` of `unit`, inside `collective` (empty: none) on lane 1
// for `collective_ms`, having entered `lane1` collectives on that lane.
v1::RankPosition At(int64_t step, const std::string& phase, int unit, const std::string& collective,
                    int64_t collective_ms, int64_t lane1) {
  v1::RankPosition p;
  p.set_step(step);
  p.set_phase(phase);
  p.set_unit(unit);
  p.set_collective(collective);
  p.set_collective_ms(collective_ms);
  p.set_lane(1);
  p.add_lane_collectives(10);
  p.add_lane_collectives(lane1);
  p.add_lane_collectives(3);
  p.set_collectives(13 + lane1);
  return p;
}

StallDetector Detector(absl::Duration abort = absl::ZeroDuration()) {
  StallDetector::Options options;
  options.heartbeat_interval = absl::Seconds(1);
  options.warning = absl::Seconds(60);
  options.abort = abort;
  return StallDetector(options);
}

// Ranks 0 and 1 wait in all-gather #7 of lane 1 from kStart; rank 2 stays before it.
void Stall(StallDetector& detector, absl::Duration waited) {
  const int64_t ms = absl::ToInt64Milliseconds(waited);
  const absl::Time now = kStart + waited;
  detector.Record("job-1", 1, 0, At(4, "forward", 3, "all-gather", ms, 7), now);
  detector.Record("job-1", 1, 1, At(4, "forward", 3, "all-gather", ms, 7), now);
  detector.Record("job-1", 1, 2, At(4, "forward", 2, "", 0, 6), now);
}

TEST(StallDetector, NamesTheRankTheOthersWaitForOncePerCollective) {
  StallDetector detector = Detector();
  detector.Track("job-1", 1, {0, 1, 2});
  Stall(detector, absl::ZeroDuration());
  Stall(detector, absl::Seconds(59));
  EXPECT_TRUE(detector.Check(kStart + absl::Seconds(59)).empty());
  Stall(detector, absl::Seconds(61));
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(61));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].job_id, "job-1");
  EXPECT_EQ(stalls[0].attempt, 1);
  EXPECT_FALSE(stalls[0].abort);
  EXPECT_EQ(stalls[0].message,
            "stall: rank 2 has not entered all-gather of unit 3 at step 4 (forward); it is in "
            "forward of unit 2 at step 4; ranks 0, 1 are waiting in all-gather of unit 3 at "
            "step 4 (forward) for 1m1s");
  // Reported once; without an abort time it never fails the attempt.
  Stall(detector, absl::Seconds(500));
  EXPECT_TRUE(detector.Check(kStart + absl::Seconds(500)).empty());
}

// A job of many ranks: the message names the first few of each list and counts the rest.
TEST(StallDetector, NamesTheFirstRanksOfALongListAndCountsTheRest) {
  StallDetector detector = Detector();
  std::vector<int32_t> ranks(40);
  for (int32_t rank = 0; rank < 40; ++rank) ranks[rank] = rank;
  detector.Track("job-1", 1, ranks);
  // Ranks 0-19 and the even ranks above wait in the all-gather; the odd ones above, 10
  // of them, stay before it.
  for (absl::Duration waited : {absl::ZeroDuration(), absl::Seconds(61)}) {
    const int64_t ms = absl::ToInt64Milliseconds(waited);
    for (int32_t rank = 0; rank < 40; ++rank) {
      const bool behind = rank >= 20 && rank % 2 == 1;
      detector.Record(
          "job-1", 1, rank,
          behind ? At(4, "forward", 2, "", 0, 6) : At(4, "forward", 3, "all-gather", ms, 7),
          kStart + waited);
    }
  }
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(61));
  ASSERT_EQ(stalls.size(), 1u);
  const std::string& message = stalls[0].message;
  EXPECT_NE(message.find("rank 35 has not entered"), std::string::npos) << message;  // 8th
  EXPECT_EQ(message.find("rank 37 has not entered"), std::string::npos) << message;
  EXPECT_NE(message.find("; and 2 more ranks; ranks 0-20, 22, 24, 26, 28, 30, 32, 34 and 2 more "
                         "are waiting in all-gather"),
            std::string::npos)
      << message;
}

// The wait reported is that of the ranks furthest along, not of a rank seen before them
// in an earlier collective.
TEST(StallDetector, TheWaitIsTheFurthestRanksOwn) {
  StallDetector detector = Detector();
  detector.Track("job-1", 1, {0, 1, 2});
  for (absl::Duration waited : {absl::ZeroDuration(), absl::Seconds(61)}) {
    const int64_t ms = absl::ToInt64Milliseconds(waited);
    detector.Record("job-1", 1, 0, At(4, "forward", 2, "all-gather", ms + 100'000, 6),
                    kStart + waited);
    detector.Record("job-1", 1, 1, At(4, "forward", 3, "all-gather", ms, 7), kStart + waited);
    detector.Record("job-1", 1, 2, At(4, "forward", 1, "", 0, 5), kStart + waited);
  }
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(61));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_NE(stalls[0].message.find("rank 1 is waiting in all-gather of unit 3 at step 4 "
                                   "(forward) for 1m1s"),
            std::string::npos)
      << stalls[0].message;
}

TEST(StallDetector, PastTheAbortTimeEveryCheckSaysAbort) {
  StallDetector detector = Detector(absl::Seconds(120));
  detector.Track("job-1", 1, {0, 1, 2});
  Stall(detector, absl::ZeroDuration());
  Stall(detector, absl::Seconds(61));
  ASSERT_EQ(detector.Check(kStart + absl::Seconds(61)).size(), 1u);
  Stall(detector, absl::Seconds(121));
  for (int check = 0; check < 2; ++check) {
    std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(121));
    ASSERT_EQ(stalls.size(), 1u);
    EXPECT_TRUE(stalls[0].abort);
    EXPECT_NE(stalls[0].message.find("longer than the stall timeout of 2m"), std::string::npos);
  }
  detector.Forget("job-1");
  EXPECT_TRUE(detector.Check(kStart + absl::Seconds(200)).empty());
}

TEST(StallDetector, ASlowRankThatMovesIsNoStallAndASilentOneIs) {
  StallDetector detector = Detector();
  detector.Track("job-1", 1, {0, 1});
  detector.Record("job-1", 1, 0, At(4, "forward", 3, "all-gather", 0, 7), kStart);
  detector.Record("job-1", 1, 1, At(4, "backward", 5, "", 0, 5), kStart);
  // Rank 1 keeps moving (its unit changes), behind rank 0 on the lane.
  const absl::Time later = kStart + absl::Seconds(61);
  detector.Record("job-1", 1, 0, At(4, "forward", 3, "all-gather", 61000, 7), later);
  detector.Record("job-1", 1, 1, At(4, "backward", 4, "", 0, 6), later - absl::Seconds(1));
  EXPECT_TRUE(detector.Check(later).empty());
  // Then it falls silent: its last heartbeat grows old.
  const absl::Time silent = later + absl::Seconds(5);
  detector.Record("job-1", 1, 0, At(4, "forward", 3, "all-gather", 66000, 7), silent);
  std::vector<StallDetector::Stall> stalls = detector.Check(silent);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_NE(stalls[0].message.find("rank 1 has sent no heartbeat for 6s"), std::string::npos)
      << stalls[0].message;
}

TEST(StallDetector, IgnoresPositionsOfAttemptsItDoesNotFollow) {
  StallDetector detector = Detector();
  detector.Track("job-1", 2, {0, 1});
  detector.Record("job-1", 1, 0, At(4, "forward", 3, "all-gather", 0, 7), kStart);  // old
  detector.Record("job-1", 2, 5, At(4, "forward", 3, "all-gather", 0, 7), kStart);  // no rank 5
  detector.Record("job-9", 1, 0, At(4, "forward", 3, "all-gather", 0, 7), kStart);
  detector.Record("job-1", 2, 0, At(4, "forward", 3, "all-gather", 61000, 7), kStart);
  // Rank 1 never reported: it is named as such.
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_NE(stalls[0].message.find("rank 1 has not reported its position"), std::string::npos);
}

// After a membership change only the live ranks are followed: a rank that left is not
// waited for, and its late heartbeat is ignored.
TEST(StallDetector, FollowsTheLiveRanksOnly) {
  StallDetector detector = Detector();
  detector.Track("job-1", 1, {2, 0});
  detector.Record("job-1", 1, 1, At(4, "forward", 2, "", 0, 6), kStart);  // left
  Stall(detector, absl::ZeroDuration());
  Stall(detector, absl::Seconds(61));
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(61));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].message,
            "stall: rank 2 has not entered all-gather of unit 3 at step 4 (forward); it is in "
            "forward of unit 2 at step 4; rank 0 is waiting in all-gather of unit 3 at step 4 "
            "(forward) for 1m1s");
}

// Ranks count their collectives from 0 as each membership epoch starts (a replacement
// and the ranks that trained on alike): counts compare within an epoch, and a rank still
// counting in an earlier one is behind whatever its count. Before, a replacement at 3
// waiting beside ranks at 1003 was named as not having entered the collective.
TEST(StallDetector, ComparesCountsWithinTheirMembershipEpoch) {
  StallDetector detector = Detector();
  detector.Track("job-1", 1, {0, 1, 2});
  const auto in_epoch = [](v1::RankPosition p, int32_t epoch) {
    p.set_epoch(epoch);
    return p;
  };
  for (const absl::Duration waited : {absl::ZeroDuration(), absl::Seconds(61)}) {
    const int64_t ms = absl::ToInt64Milliseconds(waited);
    const absl::Time now = kStart + waited;
    // Ranks 0 and 1 (one a replacement) wait in epoch 2's collective #3; rank 2, which
    // counted to 1003 in epoch 0, has not moved to epoch 2.
    detector.Record("job-1", 1, 0, in_epoch(At(40, "forward", 3, "all-gather", ms, 3), 2), now);
    detector.Record("job-1", 1, 1, in_epoch(At(40, "forward", 3, "all-gather", ms, 3), 2), now);
    detector.Record("job-1", 1, 2, in_epoch(At(39, "step end", -1, "", 0, 1003), 0), now);
  }
  std::vector<StallDetector::Stall> stalls = detector.Check(kStart + absl::Seconds(61));
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].message,
            "stall: rank 2 has not entered all-gather of unit 3 at step 40 (forward); it is in "
            "step end at step 39; ranks 0, 1 are waiting in all-gather of unit 3 at step 40 "
            "(forward) for 1m1s");
}

}  // namespace
}  // namespace shardwise
