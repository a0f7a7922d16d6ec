#include "client/exit_code.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(ExitCode, RefusalsAreTheCallersToMend) {
  for (const absl::Status& refused :
       {absl::InvalidArgumentError("x"), absl::NotFoundError("x"), absl::AlreadyExistsError("x"),
        absl::PermissionDeniedError("x"), absl::UnauthenticatedError("x"),
        absl::FailedPreconditionError("x"), absl::OutOfRangeError("x"),
        absl::UnimplementedError("x")}) {
    EXPECT_TRUE(IsRefusal(refused)) << refused;
    EXPECT_EQ(ExitCodeOf(refused), kExitRefused) << refused;
  }
}

TEST(ExitCode, AnythingElseLeavesTheOutcomeUnknown) {
  for (const absl::Status& unknown :
       {absl::UnavailableError("x"), absl::DeadlineExceededError("x"),
        absl::ResourceExhaustedError("x"), absl::AbortedError("x"), absl::CancelledError("x"),
        absl::InternalError("x"), absl::UnknownError("x"), absl::DataLossError("x")}) {
    EXPECT_FALSE(IsRefusal(unknown)) << unknown;
    EXPECT_EQ(ExitCodeOf(unknown), kExitUnknown) << unknown;
  }
}

TEST(ExitCode, TheLineNamesTheCodeThenTheMessage) {
  EXPECT_EQ(FailureLine(absl::NotFoundError("job job-9 not found")),
            "shardwise: NOT_FOUND: job job-9 not found\n");
  EXPECT_EQ(FailureLine(absl::UnavailableError("cannot reach the coordinator at 127.0.0.1:1")),
            "shardwise: UNAVAILABLE: cannot reach the coordinator at 127.0.0.1:1\n");
}

}  // namespace
}  // namespace shardwise
