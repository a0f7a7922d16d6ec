#ifndef SHARDWISE_CLIENT_RETRY_POLICY_H_
#define SHARDWISE_CLIENT_RETRY_POLICY_H_

// When the client calls a coordinator again, as pure decisions over the failure and the
// time (no gRPC, no clock of their own: client.cc asks them, the tests drive them).
//
// A unary call (CallRetry): gRPC's own retry policy has already made up to five quick
// attempts on UNAVAILABLE and RESOURCE_EXHAUSTED (client.cc's service config). Past that,
// within a budget (two minutes):
//   - RESOURCE_EXHAUSTED (the coordinator's queue of calls is full: the call never ran)
//     is asked again, for every call; not gRPC's own RESOURCE_EXHAUSTED for a message
//     over a side's size limit ("Received message larger than max"), which the same
//     request meets again;
//   - DEADLINE_EXCEEDED on a connected channel (the coordinator took the call but had not
//     answered within the call's deadline: queued behind others) is asked again for a
//     call that may run twice (reads; CancelJob and ScaleJob, which set an end state or an
//     absolute target; SubmitJob, whose request id returns the job the first one made),
//     never for SetCommHook, whose second proposal would be refused while the first is
//     agreed;
//   - UNAVAILABLE on a connected channel (the coordinator answered it cannot take the
//     call now: its state file refuses writes, a full disk) is asked again for the same
//     calls, the refused call having changed nothing;
//   - anything else, or a disconnected channel (a wrong address should be told quickly),
//     is the caller's.
// Pauses double from 200 ms up to 5 s; the caller draws each one at random below its
// bound, so that many clients do not come back together.
//
// A watch (WatchRetry): the stream ends with the job's end, or with an error. A lost
// connection (UNAVAILABLE: a coordinator restarting, a keepalive that went unanswered;
// CANCELLED: a coordinator stopping ends its streams; RESOURCE_EXHAUSTED) is watched
// again, the new stream starting with the job as it is then, for up to `budget` (ten
// minutes by default) of lost contact: counted from the first failure since the last
// update, so a job that trains on through a coordinator's upgrade is followed to its
// end however long it waited quietly before. A watch that has had no update yet fails
// as any call does (a wrong address is told at once), unless the coordinator answered
// that it serves as many watches as it allows (RESOURCE_EXHAUSTED): that one waits for
// room within the budget.

#include <optional>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace shardwise {

// Whether a second run of a call does what the first did.
enum class Repeatable { kYes, kNo };

class CallRetry {
 public:
  static constexpr absl::Duration kDefaultBudget = absl::Minutes(2);

  explicit CallRetry(absl::Time start, absl::Duration budget = kDefaultBudget)
      : give_up_(start + budget) {}

  // After an attempt failed with `failure` at `now`: the bound of the pause before the
  // next one, or nullopt when the failure is the caller's. `connected`: the channel was
  // READY.
  std::optional<absl::Duration> After(const grpc::Status& failure, bool connected,
                                      Repeatable repeatable, absl::Time now);

 private:
  absl::Time give_up_;
  absl::Duration pause_ = absl::Milliseconds(200);
};

class WatchRetry {
 public:
  static constexpr absl::Duration kDefaultBudget = absl::Minutes(10);

  explicit WatchRetry(absl::Duration budget = kDefaultBudget) : budget_(budget) {}

  // An update arrived: contact is back, and the pauses start from their first.
  void Updated();
  // The stream ended with `code` (not OK) at `now`: the bound of the pause before the
  // job is watched again, or nullopt when the error is the caller's.
  std::optional<absl::Duration> After(grpc::StatusCode code, absl::Time now);

 private:
  const absl::Duration budget_;
  bool updated_ = false;                  // any update yet
  std::optional<absl::Time> lost_since_;  // the first failure since the last update
  absl::Duration pause_ = absl::Milliseconds(200);
};

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_RETRY_POLICY_H_
