#include "client/retry_policy.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(CallRetry, AsksABusyCoordinatorAgainWithDoublingPausesWithinItsBudget) {
  CallRetry retry(kStart);
  const grpc::Status busy(grpc::StatusCode::RESOURCE_EXHAUSTED, "the queue is full");
  EXPECT_EQ(retry.After(busy, true, Repeatable::kNo, kStart), absl::Milliseconds(200));
  EXPECT_EQ(retry.After(busy, true, Repeatable::kNo, kStart), absl::Milliseconds(400));
  for (int i = 0; i < 10; ++i) retry.After(busy, true, Repeatable::kNo, kStart);
  EXPECT_EQ(retry.After(busy, true, Repeatable::kNo, kStart), absl::Seconds(5));
  EXPECT_EQ(retry.After(busy, true, Repeatable::kNo, kStart + absl::Minutes(2)), std::nullopt);
}

// A call that outlived its deadline on a connected channel was queued: asked again when
// running it twice does no harm, never otherwise, and never on a channel that is not
// connected (a wrong address is told at once).
TEST(CallRetry, AsksAgainAfterADeadlineOnlyWhenConnectedAndRepeatable) {
  const grpc::Status late(grpc::StatusCode::DEADLINE_EXCEEDED, "");
  EXPECT_TRUE(CallRetry(kStart).After(late, true, Repeatable::kYes, kStart).has_value());
  EXPECT_FALSE(CallRetry(kStart).After(late, true, Repeatable::kNo, kStart).has_value());
  EXPECT_FALSE(CallRetry(kStart).After(late, false, Repeatable::kYes, kStart).has_value());
}

// UNAVAILABLE on a connected channel is the coordinator's own answer (it cannot write its
// state file): asked again as a late answer is; on a channel that is not connected it is
// a coordinator not reached, told at once.
TEST(CallRetry, AsksAgainAfterTheCoordinatorsOwnUnavailableOnlyWhenRepeatable) {
  const grpc::Status unavailable(grpc::StatusCode::UNAVAILABLE, "");
  EXPECT_TRUE(CallRetry(kStart).After(unavailable, true, Repeatable::kYes, kStart).has_value());
  EXPECT_FALSE(CallRetry(kStart).After(unavailable, true, Repeatable::kNo, kStart).has_value());
  EXPECT_FALSE(CallRetry(kStart).After(unavailable, false, Repeatable::kYes, kStart).has_value());
}

// gRPC's own RESOURCE_EXHAUSTED for a request over the coordinator's size limit is not a
// busy coordinator: the same request is refused again, so it is told at once.
TEST(CallRetry, LeavesARequestOverTheSizeLimitToTheCaller) {
  const grpc::Status too_large(grpc::StatusCode::RESOURCE_EXHAUSTED,
                               "Received message larger than max (5242880 vs. 4194304)");
  EXPECT_FALSE(CallRetry(kStart).After(too_large, true, Repeatable::kYes, kStart).has_value());
  const grpc::Status full(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "the coordinator has 64 client calls waiting");
  EXPECT_TRUE(CallRetry(kStart).After(full, true, Repeatable::kYes, kStart).has_value());
}

TEST(CallRetry, LeavesOtherFailuresToTheCaller) {
  for (const auto code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::NOT_FOUND,
                          grpc::StatusCode::UNAUTHENTICATED}) {
    EXPECT_FALSE(
        CallRetry(kStart).After(grpc::Status(code, ""), true, Repeatable::kYes, kStart).has_value())
        << code;
  }
}

// A watch follows a job through lost contact for its budget, counted from the first
// failure since the last update: a job that was quiet for longer (queued, or on a long
// step) is followed as well, and contact regained starts the budget afresh.
TEST(WatchRetry, WatchesAgainThroughLostContactForItsBudget) {
  WatchRetry retry(absl::Minutes(10));
  retry.Updated();
  const absl::Time lost = kStart + absl::Hours(3);  // quiet for hours before
  for (const auto code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::CANCELLED,
                          grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    EXPECT_TRUE(retry.After(code, lost).has_value()) << code;
  }
  EXPECT_TRUE(retry.After(grpc::StatusCode::UNAVAILABLE, lost + absl::Minutes(9)).has_value());
  EXPECT_EQ(retry.After(grpc::StatusCode::UNAVAILABLE, lost + absl::Minutes(10)), std::nullopt);
  retry.Updated();
  EXPECT_EQ(retry.After(grpc::StatusCode::UNAVAILABLE, lost + absl::Minutes(20)),
            absl::Milliseconds(200));
}

TEST(WatchRetry, LeavesTheJobsOwnErrorsToTheCaller) {
  for (const auto code : {grpc::StatusCode::NOT_FOUND, grpc::StatusCode::PERMISSION_DENIED,
                          grpc::StatusCode::UNAUTHENTICATED, grpc::StatusCode::INTERNAL}) {
    WatchRetry retry;
    retry.Updated();
    EXPECT_FALSE(retry.After(code, kStart).has_value()) << code;
  }
}

// Before its first update a watch is a call like any other: a coordinator that cannot
// be reached (a wrong address) is told at once, not after ten minutes.
TEST(WatchRetry, AWatchWithoutAnUpdateYetIsNotMadeAgain) {
  EXPECT_FALSE(WatchRetry().After(grpc::StatusCode::UNAVAILABLE, kStart).has_value());
}

// A coordinator that serves as many watches as it allows answered: a watch waits for room
// (within its budget) rather than failing before it has begun.
TEST(WatchRetry, AWatchRefusedForRoomWaitsForItBeforeItsFirstUpdate) {
  WatchRetry retry(absl::Minutes(10));
  EXPECT_TRUE(retry.After(grpc::StatusCode::RESOURCE_EXHAUSTED, kStart).has_value());
  EXPECT_TRUE(
      retry.After(grpc::StatusCode::RESOURCE_EXHAUSTED, kStart + absl::Minutes(9)).has_value());
  EXPECT_FALSE(
      retry.After(grpc::StatusCode::RESOURCE_EXHAUSTED, kStart + absl::Minutes(10)).has_value());
}

}  // namespace
}  // namespace shardwise
