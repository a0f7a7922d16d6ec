#ifndef SHARDWISE_SERVER_DATA_PLANE_BLAME_H_
#define SHARDWISE_SERVER_DATA_PLANE_BLAME_H_

// Whose data plane is at fault when an attempt's ranks all reached the rendezvous but did
// not connect: from each rank's probe of its peers (worker/comm/data_plane_probe.h), the
// ranks that no other rank could reach. Gloo's own error cannot tell: a rank fails to
// connect with every peer it shares a broken pair with, healthy or not. Pure: the
// coordinator decides with it (job_controller_joins.cc) and quarantines the workers.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/worker_service.pb.h"

namespace shardwise {

struct UnreachableRank {
  int32_t rank = 0;
  // Each rank that tried it, with why it failed ("timed out after 2s").
  std::vector<std::pair<int32_t, std::string>> tried_by;
};

// The ranks of a `world`-rank attempt that every other rank which probed them failed to
// reach, given the probes that came back (by prober rank); at least two ranks must have
// tried (the other one, in a world of two), since one prober's failure may be its own.
// None when no rank is such, or when every rank is (the network between the workers, not
// a worker, is at fault then), so that a healthy worker is never blamed for a partition.
// `hosts` (by rank, where known) names each rank's host: a prober on the target's own
// host (not loopback) neither clears nor blames it, since it reaches it without crossing
// the network (ranks sharing a host whose firewall drops its peers' connections would
// otherwise vouch for each other).
std::vector<UnreachableRank> BlameUnreachableRanks(
    int32_t world, const std::map<int32_t, v1::DataPlaneProbeResult>& probes,
    const std::vector<std::string>& hosts = {});

// "rank 0 (timed out after 2s), rank 1 (Connection refused)".
std::string TriedBy(const UnreachableRank& unreachable);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_DATA_PLANE_BLAME_H_
