#include "client/retry_policy.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace shardwise {
namespace {

constexpr absl::Duration kFirstPause = absl::Milliseconds(200);
constexpr absl::Duration kLongestPause = absl::Seconds(5);

// The current pause, and the next one doubled.
absl::Duration TakePause(absl::Duration* pause) {
  const absl::Duration taken = *pause;
  *pause = std::min(*pause * 2, kLongestPause);
  return taken;
}

// gRPC's words when a message passes the sender's or the receiver's size limit
// ("Received message larger than max (N vs. M)", "Sent message larger than max ...").
bool IsMessageSizeRefusal(const grpc::Status& failure) {
  return absl::StrContains(failure.error_message(), "message larger than max");
}

}  // namespace

std::optional<absl::Duration> CallRetry::After(const grpc::Status& failure, bool connected,
                                               Repeatable repeatable, absl::Time now) {
  if (now >= give_up_) return std::nullopt;
  const grpc::StatusCode code = failure.error_code();
  const bool busy = code == grpc::StatusCode::RESOURCE_EXHAUSTED && !IsMessageSizeRefusal(failure);
  const bool queued =
      code == grpc::StatusCode::DEADLINE_EXCEEDED && connected && repeatable == Repeatable::kYes;
  const bool refused_for_now =
      code == grpc::StatusCode::UNAVAILABLE && connected && repeatable == Repeatable::kYes;
  if (!busy && !queued && !refused_for_now) return std::nullopt;
  return TakePause(&pause_);
}

void WatchRetry::Updated() {
  updated_ = true;
  lost_since_.reset();
  pause_ = kFirstPause;
}

std::optional<absl::Duration> WatchRetry::After(grpc::StatusCode code, absl::Time now) {
  // Before the first update only a coordinator that answered it is full (--max_watches)
  // is asked again: it was reached, and a watch waits for room as any call does.
  if (!updated_ && code != grpc::StatusCode::RESOURCE_EXHAUSTED) return std::nullopt;
  if (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::CANCELLED &&
      code != grpc::StatusCode::RESOURCE_EXHAUSTED) {
    return std::nullopt;
  }
  if (!lost_since_.has_value()) lost_since_ = now;
  if (now >= *lost_since_ + budget_) return std::nullopt;
  return TakePause(&pause_);
}

}  // namespace shardwise
