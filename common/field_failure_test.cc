#include "common/field_failure.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(FieldFailure, WhatTheInputHoldsIsInvalidWhatTheHostCouldNotDoNowStays) {
  const absl::Status bad = FieldFailure("job.model.path", absl::DataLossError("truncated"));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "job.model.path: truncated");

  const absl::Status now = FieldFailure("job.model.path", absl::UnavailableError("EIO"));
  EXPECT_EQ(now.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(now.message(), "job.model.path: EIO");
}

TEST(FieldFailure, ACallerKeepsTheCodesItNames) {
  const std::initializer_list<absl::StatusCode> kept = {absl::StatusCode::kUnavailable,
                                                        absl::StatusCode::kNotFound};
  EXPECT_EQ(FieldFailure("f", absl::NotFoundError("gone"), kept).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FieldFailure("f", absl::PermissionDeniedError("no"), kept).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldFailure("f", absl::NotFoundError("gone")).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardwise
