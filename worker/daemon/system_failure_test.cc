#include "worker/daemon/system_failure.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(SystemFailure, AHostOutOfThreadsIsResourceExhaustedTheRestInternal) {
  const absl::Status out = SystemFailureStatus(
      std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again), "thread"));
  EXPECT_EQ(out.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(out.message().find("could not start a thread"), std::string::npos) << out;
  const absl::Status other = SystemFailureStatus(
      std::system_error(std::make_error_code(std::errc::invalid_argument), "mutex"));
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal);
  EXPECT_NE(other.message().find("mutex"), std::string::npos) << other;
  // A host out of threads is the worker's own failure; another system error (a bug) and
  // any other status are not.
  EXPECT_TRUE(IsThisWorkersFault(out));
  EXPECT_FALSE(IsThisWorkersFault(other));
  EXPECT_FALSE(IsThisWorkersFault(absl::ResourceExhaustedError("the job's model is too large")));
}

}  // namespace
}  // namespace shardwise
