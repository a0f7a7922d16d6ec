#include "contracts/membership.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "contracts/job_ranks.h"
#include "contracts/timeouts.h"

namespace shardwise {

std::string MembershipEpochKeyPrefix(int32_t epoch) { return absl::StrCat("epoch", epoch); }

std::optional<int32_t> MembershipEpochOfKey(absl::string_view key) {
  if (!absl::ConsumePrefix(&key, "epoch")) return std::nullopt;
  const size_t slash = key.find('/');
  int32_t epoch = 0;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(key.substr(0, slash), &epoch)) {
    return std::nullopt;
  }
  return epoch;
}
namespace {

std::string Ranks(const std::vector<int32_t>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// The first rank of each replica group of the job's ranks (JobRanks) that is not in
// `live`, ascending: groups that left, or that were never placed.
std::vector<int32_t> GroupsNotLive(const v1::JobSpec& spec, const std::vector<int32_t>& live) {
  const std::set<int32_t> is_live(live.begin(), live.end());
  std::vector<int32_t> firsts;
  for (int32_t first = 0; first < JobRanks(spec); first += ReplicaGroupSize(spec)) {
    if (is_live.count(first) == 0) firsts.push_back(first);
  }
  return firsts;
}

}  // namespace

absl::Duration PeerTimeout(const v1::JobSpec& spec) {
  const int32_t seconds = spec.fault_tolerance().peer_timeout_seconds();
  return absl::Seconds(seconds > 0 ? seconds : 10);
}

absl::Duration JoinerWait(absl::Duration collective_timeout, absl::Duration longest_step) {
  return std::min(collective_timeout + 2 * std::max(longest_step, absl::ZeroDuration()),
                  absl::Milliseconds(kMaxTimeoutMilliseconds));
}

std::vector<int32_t> ReplicaGroupOf(const v1::JobSpec& spec, int32_t rank) {
  const int32_t size = ReplicaGroupSize(spec);
  std::vector<int32_t> group;
  group.reserve(size);
  for (int32_t r = rank / size * size; r < (rank / size + 1) * size; ++r) group.push_back(r);
  return group;
}

std::vector<int32_t> LiveRanks(const v1::JobSpec& spec, const v1::Membership& membership,
                               int32_t attempt) {
  if (membership.attempt() == attempt && membership.epoch() > 0) {
    return {membership.live_ranks().begin(), membership.live_ranks().end()};
  }
  std::vector<int32_t> all(std::max(0, spec.world_size()));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

std::vector<int32_t> CoveredRanks(const v1::JobSpec& spec, const std::vector<int32_t>& live,
                                  int32_t rank) {
  std::vector<int32_t> covered;
  if (spec.fault_tolerance().batch() != v1::FaultTolerance::KEEP_GLOBAL) return covered;
  const int32_t size = ReplicaGroupSize(spec);
  const std::vector<int32_t> left_groups = GroupsNotLive(spec, live);
  const auto me = std::find(live.begin(), live.end(), rank);
  if (left_groups.empty() || me == live.end()) return covered;
  const int32_t index = static_cast<int32_t>(me - live.begin());
  const int32_t live_groups = static_cast<int32_t>(live.size()) / size;
  for (size_t k = 0; k < left_groups.size(); ++k) {
    if (static_cast<int32_t>(k) % live_groups == index / size) {
      covered.push_back(left_groups[k] + index % size);
    }
  }
  return covered;
}

std::vector<int32_t> GroupsToHeal(const v1::JobSpec& spec, const v1::Membership& current,
                                  int32_t attempt, int32_t groups) {
  const std::vector<int32_t> firsts = GroupsNotLive(spec, LiveRanks(spec, current, attempt));
  std::vector<int32_t> ranks;
  for (size_t g = 0; g < firsts.size() && static_cast<int32_t>(g) < groups; ++g) {
    for (int32_t r : ReplicaGroupOf(spec, firsts[g])) ranks.push_back(r);
  }
  return ranks;
}

v1::Membership Rejoined(const v1::JobSpec& spec, const v1::Membership& current, int32_t attempt,
                        const std::vector<int32_t>& ranks) {
  v1::Membership next;
  next.set_attempt(attempt);
  next.set_epoch(current.attempt() == attempt ? current.epoch() + 1 : 1);
  const std::vector<int32_t> before = LiveRanks(spec, current, attempt);
  std::set<int32_t> live(before.begin(), before.end());
  live.insert(ranks.begin(), ranks.end());
  for (int32_t r : live) next.add_live_ranks(r);
  if (current.attempt() != attempt) return next;
  for (int32_t r : current.left_ranks()) {
    if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) next.add_left_ranks(r);
  }
  return next;
}

MembershipDecision DecideAfterLoss(const v1::JobSpec& spec, const v1::Membership& current,
                                   int32_t attempt, const std::vector<int32_t>& lost) {
  MembershipDecision decision;
  const std::vector<int32_t> live = LiveRanks(spec, current, attempt);
  std::set<int32_t> leaving;
  for (int32_t rank : lost) {
    for (int32_t r : ReplicaGroupOf(spec, rank)) leaving.insert(r);
  }
  std::vector<int32_t> staying;
  for (int32_t r : live) {
    if (leaving.count(r) == 0) staying.push_back(r);
  }
  const int32_t groups = static_cast<int32_t>(staying.size()) / ReplicaGroupSize(spec);
  const int32_t needed = std::max(1, spec.fault_tolerance().min_replicas());
  const std::vector<int32_t> left(leaving.begin(), leaving.end());
  if (!spec.has_fault_tolerance() || groups < needed) {
    decision.summary =
        absl::StrCat("without ", Ranks(left), " only ", groups, " replica", groups == 1 ? "" : "s",
                     " would be left, fewer than fault_tolerance.min_replicas ", needed,
                     ": the attempt cannot train on");
    return decision;
  }
  decision.train_on = true;
  v1::Membership& next = decision.next;
  next.set_attempt(attempt);
  next.set_epoch(current.attempt() == attempt ? current.epoch() + 1 : 1);
  for (int32_t r : staying) next.add_live_ranks(r);
  if (current.attempt() == attempt) *next.mutable_left_ranks() = current.left_ranks();
  for (int32_t r : left) {
    if (std::find(live.begin(), live.end(), r) != live.end()) next.add_left_ranks(r);
  }
  decision.summary =
      absl::StrCat(Ranks(left), " left; ", Ranks(staying), " train on (epoch ", next.epoch(), ", ",
                   groups, " replica", groups == 1 ? "" : "s", ")");
  return decision;
}

}  // namespace shardwise
