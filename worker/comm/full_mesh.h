#ifndef SHARDWISE_WORKER_COMM_FULL_MESH_H_
#define SHARDWISE_WORKER_COMM_FULL_MESH_H_

// The Gloo context's full mesh over TCP, connected through a rendezvous store.
//
// Gloo's TCP pairs each listen on a socket of their own, so a rank has W-1 addresses to
// publish, one per peer; like Gloo's own connectFullMesh, a rank publishes them all under
// one key (W keys a context, W(W-1) x 136 bytes held by the coordinator: 142 MB at
// W = 1024). Gloo's connect then reads every peer's whole key for the one address meant
// for it, with a get per peer: W(W-1)^2 x 136 bytes through the coordinator (146 GB at
// W = 1024) in about 3 W^2 calls (a wait, and a get that waits again, per peer; and each
// rank's host name, read by every rank, for the pairs' local rank). This one reads only
// the address meant for it, from many keys a call (MultiGetStore): W(W-1) x 136 bytes
// (142 MB) in 2 W ceil(W / 1024) calls (a wait and a read per 1024 peers) and W writes;
// the local rank comes from the IP addresses the peers listen on.

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gloo/context.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/device.h"
#include "worker/comm/multi_get_store.h"

namespace shardwise {

// The store key holding `rank`'s pair addresses, in its peers' order. Not Gloo's name: a
// worker of Gloo's own connect in the same attempt waits for keys this one never writes
// (the attempt times out and blames), rather than reading addresses it misplaces.
std::string MeshAddressKey(int rank);

// Where the pair for `peer` sits among `owner`'s pairs (which skip the owner itself).
int PairIndex(int owner, int peer);

// The read of `owner`'s address for `peer` from the owner's key, its addresses being
// `address_bytes` long each.
StoreRead PeerAddressRead(int owner, int peer, size_t address_bytes);

struct FullMeshOptions {
  // The pairs' timeout while they connect (Gloo's TCP pair waits 5 times this for its
  // peer's first connection).
  std::chrono::milliseconds pair_timeout{60000};
  // The waits for the peers' keys: zero keeps the store's own bound.
  std::chrono::milliseconds store_timeout{0};
};

// Connects rank `rank` of `size` to every other rank over `device` (Gloo's TCP
// transport). Gloo throws; this returns UNAVAILABLE with what the store or a pair threw.
absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectFullMesh(
    gloo::rendezvous::Store& store, const std::shared_ptr<gloo::transport::Device>& device,
    int rank, int size, const FullMeshOptions& options);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_FULL_MESH_H_
