#ifndef SHARDWISE_CONTRACTS_MEMBERSHIP_H_
#define SHARDWISE_CONTRACTS_MEMBERSHIP_H_

// Fault-tolerant jobs' membership (spec.fault_tolerance), as pure decisions: a lost rank
// takes its replica group out of the job (the ranks that hold the replica's parameters
// between them: the rank alone under NO_SHARD, its shard group under the HYBRID
// strategies), and the attempt trains on while at least fault_tolerance.min_replicas
// groups are live. The coordinator decides and persists (server/job_controller_membership.cc);
// the ranks follow (worker/train/membership_mailbox.h).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/job.pb.h"
#include "proto/job_spec.pb.h"

namespace shardwise {

// The ranks of `rank`'s replica group, ascending.
std::vector<int32_t> ReplicaGroupOf(const v1::JobSpec& spec, int32_t rank);

// fault_tolerance.peer_timeout_seconds, or its default (10 s) where unset: how long a live
// rank waits for a peer inside a collective before it counts the peer lost.
absl::Duration PeerTimeout(const v1::JobSpec& spec);

// How long a replacement waits at its epoch's rendezvous for the live ranks, which move
// there at a step boundary once every one of them holds the epoch: the step in flight
// when the change reached them, and the next one if one voted before it had it, each up
// to `longest_step` (the attempt's longest so far, its checkpoint and evaluation in it),
// plus the collective timeout for the move itself. A fixed bound failed every heal of a
// job whose steps take longer than the collective timeout, and counted it against the
// joiner. At most kMaxTimeoutMilliseconds (contracts/timeouts.h), as the joiner takes it.
absl::Duration JoinerWait(absl::Duration collective_timeout, absl::Duration longest_step);

// The phase a fault-tolerant rank's position shows (RankPosition.phase) once a collective
// failed on a lost peer and it waits for the membership without it: a coordinator that
// restarted learns from it that a peer is gone (job_controller_reattach.cc).
inline constexpr char kAwaitingMembershipPhase[] = "membership change";

// The rendezvous keys of membership epoch `epoch` begin with this prefix and a '/' (each
// epoch connects its groups through its own keys: worker/train/epoch_store.h). The
// coordinator drops an epoch's keys once two newer ones exist
// (RendezvousStore::DropEpochsBefore), so a long job's losses and heals do not fill its
// attempt's key limit.
std::string MembershipEpochKeyPrefix(int32_t epoch);
// The epoch whose keys `key` is one of; nullopt for a key of no epoch.
std::optional<int32_t> MembershipEpochOfKey(absl::string_view key);

// The live ranks of `membership` for `attempt`: ranks 0 to world_size - 1 (the job's
// initial size) while its membership has not changed (`membership` unset, or of another
// attempt).
std::vector<int32_t> LiveRanks(const v1::JobSpec& spec, const v1::Membership& membership,
                               int32_t attempt);

// fault_tolerance.batch KEEP_GLOBAL: the ranks that left whose rows `rank` (live in
// `live`) trains on as well, ascending; none under DROP or while every rank is live.
// The left groups, in ascending order, go round the live groups in ascending order (the
// k-th left group to live group k mod G'), each left rank to the live rank at its place
// in its group (docs/semantics.md, "Batches").
std::vector<int32_t> CoveredRanks(const v1::JobSpec& spec, const std::vector<int32_t>& live,
                                  int32_t rank);

struct MembershipDecision {
  bool train_on = false;
  v1::Membership next;  // when train_on: the next epoch
  // In words: who leaves and who goes on, or why the attempt cannot.
  std::string summary;
};

// fault_tolerance.heal and growth (`shardwise scale`): the ranks, ascending, of the lowest
// `groups` replica groups of the job's ranks (JobRanks) not live in `current` for
// `attempt` (groups that left, or groups never placed yet), fewer if fewer are not live;
// and the membership with `ranks` live again, the next epoch.
std::vector<int32_t> GroupsToHeal(const v1::JobSpec& spec, const v1::Membership& current,
                                  int32_t attempt, int32_t groups);
v1::Membership Rejoined(const v1::JobSpec& spec, const v1::Membership& current, int32_t attempt,
                        const std::vector<int32_t>& ranks);

// What follows the loss of `lost` (ranks of `attempt`) in `current`.
MembershipDecision DecideAfterLoss(const v1::JobSpec& spec, const v1::Membership& current,
                                   int32_t attempt, const std::vector<int32_t>& lost);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_MEMBERSHIP_H_
