#include "server/stall_detector.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardwise {
namespace {

// A stall's message names this many entries (a rank, or a run of ranks) of each list at
// most and counts the rest: a job of a thousand ranks would write kilobytes per event.
constexpr size_t kNamedInAStall = 8;

// Ascending ranks, runs of three or more as "first-last", the rest counted: "0-2",
// "0, 2, 5", "0-20, 22, 24, 26, 28, 30, 32, 34 and 2 more".
std::string RankList(const std::vector<int32_t>& ranks) {
  std::vector<std::string> runs;
  size_t named = 0;
  for (size_t i = 0; i < ranks.size() && runs.size() < kNamedInAStall;) {
    size_t end = i + 1;
    while (end < ranks.size() && ranks[end] == ranks[end - 1] + 1) ++end;
    if (end - i < 3) end = i + 1;
    runs.push_back(end - i == 1 ? absl::StrCat(ranks[i])
                                : absl::StrCat(ranks[i], "-", ranks[end - 1]));
    named += end - i;
    i = end;
  }
  std::string list = absl::StrJoin(runs, ", ");
  if (named < ranks.size()) absl::StrAppend(&list, " and ", ranks.size() - named, " more");
  return list;
}

// The first entries of `missing`, the rest counted.
std::string MissingList(const std::vector<std::string>& missing) {
  if (missing.size() <= kNamedInAStall) return absl::StrJoin(missing, "; ");
  return absl::StrCat(absl::StrJoin(missing.begin(), missing.begin() + kNamedInAStall, "; "),
                      "; and ", missing.size() - kNamedInAStall, " more ranks");
}

std::string Where(const v1::RankPosition& p) {
  std::string where = p.collective();
  if (p.unit() >= 0) absl::StrAppend(&where, " of unit ", p.unit());
  absl::StrAppend(&where, " at step ", p.step(), " (", p.phase(), ")");
  return where;
}

// Collectives entered on `lane`, after the membership epoch the rank counts from: ranks
// compare by both (each counts from 0 as it starts an epoch); workers from before lanes
// report only their total.
std::pair<int32_t, int64_t> LaneProgress(const v1::RankPosition& p, int lane) {
  return {p.epoch(), lane >= 0 && lane < p.lane_collectives_size() ? p.lane_collectives(lane)
                                                                   : p.collectives()};
}

bool Moved(const v1::RankPosition& before, const v1::RankPosition& now) {
  return before.collectives() != now.collectives() || before.epoch() != now.epoch() ||
         before.step() != now.step() || before.phase() != now.phase() ||
         before.unit() != now.unit();
}

}  // namespace

void StallDetector::Track(const std::string& job_id, int32_t attempt, std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  absl::MutexLock lock(&mu_);
  Attempt& tracked = attempts_[job_id];
  tracked = Attempt{};
  tracked.attempt = attempt;
  tracked.ranks = std::move(ranks);
}

void StallDetector::Forget(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  attempts_.erase(job_id);
}

void StallDetector::Record(const std::string& job_id, int32_t attempt, int32_t rank,
                           const v1::RankPosition& position, absl::Time now) {
  absl::MutexLock lock(&mu_);
  auto it = attempts_.find(job_id);
  if (it == attempts_.end() || it->second.attempt != attempt ||
      !std::binary_search(it->second.ranks.begin(), it->second.ranks.end(), rank)) {
    return;
  }
  auto [seen, inserted] = it->second.positions.try_emplace(rank);
  const bool moved = inserted || Moved(seen->second.position, position);
  seen->second.position = position;
  seen->second.received = now;
  if (moved) seen->second.moved = now;
}

std::vector<StallDetector::Stall> StallDetector::Check(absl::Time now) {
  absl::MutexLock lock(&mu_);
  std::vector<Stall> stalls;
  for (auto& [job_id, attempt] : attempts_) {
    if (std::optional<Stall> stall = CheckAttempt(job_id, attempt, now)) {
      stalls.push_back(std::move(*stall));
    }
  }
  return stalls;
}

// Every rank runs the same sequence of collectives on each of its lanes, so a rank's
// count of collectives entered on a lane says which one it is in. Ranks that have been
// inside collective N of a lane for longer than the warning time wait for the ranks whose
// count on that lane is below N (they have not entered it) or whose heartbeats stopped (a
// frozen process).
std::optional<StallDetector::Stall> StallDetector::CheckAttempt(const std::string& job_id,
                                                                Attempt& attempt,
                                                                absl::Time now) const {
  const absl::Duration silent_after = 3 * options_.heartbeat_interval;
  // The waiters: ranks inside a collective for longer than the warning time. A rank whose
  // heartbeats stopped is a suspect, not a waiter: its last position may be inside a
  // collective it will never leave.
  std::vector<std::pair<int32_t, absl::Duration>> waiters;
  int lane = -1;  // the lane of the longest wait: the one examined
  absl::Duration longest = absl::ZeroDuration();
  for (const auto& [rank, seen] : attempt.positions) {
    const v1::RankPosition& position = seen.position;
    if (position.collective().empty() || now - seen.received > silent_after) continue;
    const absl::Duration in_collective =
        absl::Milliseconds(position.collective_ms()) + (now - seen.received);
    if (in_collective < options_.warning) continue;
    waiters.push_back({rank, in_collective});
    if (in_collective > longest) {
      longest = in_collective;
      lane = position.lane();
    }
  }
  const v1::RankPosition* waiting_at = nullptr;
  absl::Duration waited = absl::ZeroDuration();
  std::vector<int32_t> waiting;
  for (const auto& [rank, in_collective] : waiters) {
    const v1::RankPosition& position = attempt.positions.at(rank).position;
    if (position.lane() != lane) continue;
    if (waiting_at == nullptr || LaneProgress(position, lane) > LaneProgress(*waiting_at, lane)) {
      waiting_at = &position;
      waiting.clear();
      waited = absl::ZeroDuration();  // how long the ranks furthest along have waited
    }
    if (LaneProgress(position, lane) == LaneProgress(*waiting_at, lane)) {
      waiting.push_back(rank);
      waited = std::max(waited, in_collective);
    }
  }
  if (waiting_at == nullptr) return std::nullopt;
  std::vector<std::string> missing;
  for (int32_t rank : attempt.ranks) {
    auto it = attempt.positions.find(rank);
    if (it == attempt.positions.end()) {
      missing.push_back(absl::StrCat("rank ", rank, " has not reported its position"));
      continue;
    }
    const v1::RankPosition& position = it->second.position;
    const absl::Duration silent = now - it->second.received;
    // Behind the waiters and not moving (a rank merely slower gets there soon).
    if (LaneProgress(position, lane) < LaneProgress(*waiting_at, lane) &&
        now - it->second.moved >= options_.warning) {
      missing.push_back(absl::StrCat(
          "rank ", rank, " has not entered ", Where(*waiting_at), "; it is in ", position.phase(),
          position.unit() >= 0 ? absl::StrCat(" of unit ", position.unit()) : "", " at step ",
          position.step()));
    } else if (silent > silent_after) {
      missing.push_back(
          absl::StrCat("rank ", rank, " has sent no heartbeat for ",
                       absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(100)))));
    }
  }
  if (missing.empty()) return std::nullopt;  // every rank is inside: slow, not stalled
  Stall stall;
  stall.job_id = job_id;
  stall.attempt = attempt.attempt;
  stall.message = absl::StrCat(
      "stall: ", MissingList(missing), "; rank", waiting.size() > 1 ? "s " : " ", RankList(waiting),
      waiting.size() > 1 ? " are" : " is", " waiting in ", Where(*waiting_at), " for ",
      absl::FormatDuration(absl::Trunc(waited, absl::Seconds(1))));
  if (options_.abort > absl::ZeroDuration() && waited >= options_.abort) {
    stall.abort = true;
    absl::StrAppend(&stall.message, " (longer than the stall timeout of ",
                    absl::FormatDuration(options_.abort), ")");
    return stall;
  }
  const std::pair<int32_t, int64_t> at{waiting_at->epoch(), waiting_at->collectives()};
  if (attempt.reported_at == at) return std::nullopt;
  attempt.reported_at = at;  // the waiter's epoch and total: unique
  return stall;
}

}  // namespace shardwise
