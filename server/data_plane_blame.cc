#include "server/data_plane_blame.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"

namespace shardwise {

namespace {

// Whether `prober` and `target` share a host other than loopback (where every worker of
// one machine is, and no firewall stands between them).
bool OnTheSameHost(const std::vector<std::string>& hosts, int32_t prober, int32_t target) {
  const auto host = [&](int32_t rank) -> const std::string* {
    return rank >= 0 && rank < static_cast<int32_t>(hosts.size()) && !hosts[rank].empty()
               ? &hosts[rank]
               : nullptr;
  };
  const std::string* a = host(prober);
  const std::string* b = host(target);
  return a != nullptr && b != nullptr && *a == *b &&
         !IsLoopbackAddress(JoinHostPort(*a, /*port=*/0));
}

}  // namespace

std::vector<UnreachableRank> BlameUnreachableRanks(
    int32_t world, const std::map<int32_t, v1::DataPlaneProbeResult>& probes,
    const std::vector<std::string>& hosts) {
  std::vector<UnreachableRank> blamed;
  for (int32_t rank = 0; rank < world; ++rank) {
    UnreachableRank unreachable{rank, {}};
    bool reached = false;
    for (const auto& [prober, probe] : probes) {
      if (prober == rank || OnTheSameHost(hosts, prober, rank)) continue;
      // A prober counts once, whatever its result lists: one that named the rank twice
      // must not stand for the two probers blame needs.
      bool tried = false;
      for (const auto& outcome : probe.outcomes()) {
        if (outcome.rank() != rank) continue;
        reached = reached || outcome.reached();
        if (!outcome.reached() && !tried)
          unreachable.tried_by.emplace_back(prober, outcome.error());
        tried = tried || !outcome.reached();
      }
    }
    // One prober's failure may be its own: two are needed, where there are two others.
    const size_t needed = world > 2 ? 2 : 1;
    if (!reached && unreachable.tried_by.size() >= needed) {
      blamed.push_back(std::move(unreachable));
    }
  }
  if (static_cast<int32_t>(blamed.size()) >= world) blamed.clear();
  return blamed;
}

std::string TriedBy(const UnreachableRank& unreachable) {
  std::vector<std::string> parts;
  parts.reserve(unreachable.tried_by.size());
  for (const auto& [prober, error] : unreachable.tried_by) {
    parts.push_back(absl::StrCat("rank ", prober, " (", error, ")"));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace shardwise
