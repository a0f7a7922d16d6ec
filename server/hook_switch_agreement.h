#ifndef SHARDWISE_SERVER_HOOK_SWITCH_AGREEMENT_H_
#define SHARDWISE_SERVER_HOOK_SWITCH_AGREEMENT_H_

// Agreeing a change of one attempt's communication hook (`shardwise set-hook`) between
// the coordinator and every rank, in two phases. The coordinator proposes a step no rank
// should have reached yet (far enough ahead, at the job's reported speed, for the
// proposal to reach every rank first); each rank accepts, or refuses because it already
// started that step. All accept: commit, and every rank switches at that step. One
// refuses: abandon, and propose again after the step it reported, a bounded number of
// times. In a fault-tolerant job "every rank" is every live rank of its membership.
// (worker/train/hook_schedule.h is the ranks' half; docs/operations.md the protocol.)
//
// Pure decisions: the JobController writes each proposal and decision to the state file
// before any rank hears it, and sends them.
//
// Thread-safety: none; the JobController calls it under its lock.

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

class HookSwitchAgreement {
 public:
  struct Options {
    // The switch is proposed for the step the job should reach this long after its
    // latest progress report, and at least this many steps ahead.
    absl::Duration lead = absl::Seconds(2);
    int64_t min_lead_steps = 3;
    // Proposals per request: each retry starts after the newest step a rank reported, so
    // another fails only if the job keeps outrunning its progress reports.
    int max_proposals = 3;
  };

  explicit HookSwitchAgreement(const Options& options) : options_(options) {}

  // A new request for `job`: FAILED_PRECONDITION while another switch is being agreed.
  absl::Status BeginRequest(const v1::Job& job);

  // The proposal to switch `job` to `hook` at a step after both its reported progress and
  // `not_before`, requested at `request_time`; FAILED_PRECONDITION if that step is past
  // the job's last.
  absl::StatusOr<v1::HookSwitch> MakeProposal(const v1::Job& job, const v1::CommHook& hook,
                                              int64_t not_before, absl::Time request_time) const;
  // The proposal was recorded and sent: answers are collected for it.
  void Proposed(const v1::HookSwitch& proposal);

  struct AckDecision {
    enum class Kind {
      kNone,     // not for the outstanding proposal, or more answers to come
      kCommit,   // every rank accepted
      kAbandon,  // a rank refused (`reason`); propose again after `retry_after` if set
    };
    Kind kind = Kind::kNone;
    std::string reason;
    std::optional<int64_t> retry_after;  // the step the refusing rank had started
  };
  // Rank `rank`'s answer; `job` is the job as it stands (its ranks and, for a
  // fault-tolerant job, its live ranks: every one of them must accept, and the answers of
  // ranks that left no longer count).
  AckDecision OnAck(const v1::Job& job, int32_t rank, const v1::HookChangeAck& ack);
  // After `job`'s membership changed (and after each answer): kCommit if every live rank
  // has accepted, else kNone. The answers of ranks that left are forgotten, so a
  // replacement that takes a rank's number answers for itself.
  AckDecision Reconsider(const v1::Job& job);

  // The outstanding proposal, now decided or ended with its attempt; nullopt if none.
  std::optional<v1::HookSwitch> EndProposal();

  bool proposing() const { return proposal_.has_value(); }
  const std::optional<v1::HookSwitch>& proposal() const { return proposal_; }

 private:
  const Options options_;
  std::optional<v1::HookSwitch> proposal_;
  std::set<int32_t> accepted_;
  int proposals_ = 0;  // for the current request
};

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_HOOK_SWITCH_AGREEMENT_H_
