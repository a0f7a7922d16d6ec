#include "contracts/permanent_failure.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(PermanentFailure, AJobsFieldFailsEveryAttemptUnlessTheHostCouldNotTellNow) {
  const absl::Status bad =
      JobFieldFailure("job.data.tokens.tokenizer", absl::NotFoundError("'/t' does not exist"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "job.data.tokens.tokenizer: '/t' does not exist");
  EXPECT_TRUE(IsPermanent(bad));

  const absl::Status now = JobFieldFailure(
      "job.data.tokens.tokenizer", absl::UnavailableError("'/t' cannot be opened now: EMFILE"));
  EXPECT_EQ(now.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(now.message(), "job.data.tokens.tokenizer: '/t' cannot be opened now: EMFILE");
  EXPECT_FALSE(IsPermanent(now));
}

}  // namespace
}  // namespace shardwise
