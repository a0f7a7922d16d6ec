#ifndef SHARDWISE_CONTRACTS_DATA_PLANE_VERSION_H_
#define SHARDWISE_CONTRACTS_DATA_PLANE_VERSION_H_

#include <cstdint>

// The version of what a worker's release sends its peers over the data plane: the
// collectives a step runs and their order, each one's element count and type (the flat
// layout, its padding and sharding), and the payloads of point-to-point hand-overs (a
// heal's state transfer). Ranks of one attempt must agree on all of it: a rank whose
// collective carries a different number of elements than its peer's does not fail
// cleanly in Gloo but ends its daemon. A worker names the version when it registers
// (v1::RegisterWorkerRequest.data_plane_version), and the coordinator places an attempt's
// ranks, its replacements and its added replica groups only on workers of one version
// (server/scheduler.h), so that a rolling upgrade never mixes releases that disagree in
// one collective. A worker of a release before this field names 0, a version of its own.
//
// Raise it in the release that changes any of the above; data_plane_version_test pins
// the flat layouts of reference models to catch the commonest such change.

namespace shardwise {

inline constexpr int32_t kDataPlaneVersion = 1;

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_DATA_PLANE_VERSION_H_
