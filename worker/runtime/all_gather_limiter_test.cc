// The limiter's rule with a recording event type (on a GPU the event is a CUDA event;
// the CUDA tests use the real one).

#include "worker/runtime/all_gather_limiter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// Records which events were waited for, into a log the test owns.
struct RecordingEvent {
  int id = 0;
  std::vector<int>* waited = nullptr;
  absl::Status Synchronize() {
    waited->push_back(id);
    return id < 0 ? absl::InternalError("event failed") : absl::OkStatus();
  }
};

TEST(AllGatherLimiterTest, WaitsForTheOldestFreeOnlyWhenTwoArePending) {
  std::vector<int> waited;
  AllGatherLimiter<RecordingEvent> limiter;
  bool did_wait = true;
  ASSERT_TRUE(limiter.BeforeUnshard(&did_wait).ok());  // nothing freed yet
  EXPECT_FALSE(did_wait);
  limiter.OnReshard({1, &waited});
  ASSERT_TRUE(limiter.BeforeUnshard(&did_wait).ok());  // one pending: below the limit
  EXPECT_FALSE(did_wait);
  limiter.OnReshard({2, &waited});
  ASSERT_TRUE(limiter.BeforeUnshard(&did_wait).ok());  // two pending: wait for 1
  EXPECT_TRUE(did_wait);
  EXPECT_EQ(waited, std::vector<int>({1}));
  EXPECT_EQ(limiter.pending(), 1);
  limiter.OnReshard({3, &waited});
  ASSERT_TRUE(limiter.BeforeUnshard(&did_wait).ok());
  EXPECT_EQ(waited, std::vector<int>({1, 2}));  // oldest first
  EXPECT_EQ(limiter.pending(), 1);
}

TEST(AllGatherLimiterTest, ALimitOfOneWaitsForEveryFreeAndEventErrorsPropagate) {
  std::vector<int> waited;
  AllGatherLimiter<RecordingEvent> limiter(/*max_in_flight=*/1);
  limiter.OnReshard({-1, &waited});
  const absl::Status status = limiter.BeforeUnshard();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(waited, std::vector<int>({-1}));
  EXPECT_EQ(limiter.pending(), 0);
}

}  // namespace
}  // namespace shardwise
