#include "worker/comm/full_mesh.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "gloo/transport/context.h"
#include "gloo/transport/tcp/address.h"

namespace shardwise {
namespace {

using TcpAddress = gloo::transport::tcp::Address;

// Peers whose addresses one wait and one read ask for (a request's size stays small
// however large the world).
constexpr int kPeersPerRead = 1024;

// A gloo::Context whose pairs this file connects (Gloo keeps the members it fills
// protected, for its own rendezvous::Context).
class MeshContext final : public gloo::Context {
 public:
  MeshContext(int rank, int size) : gloo::Context(rank, size) {}
  void Adopt(std::shared_ptr<gloo::transport::Device> device,
             std::shared_ptr<gloo::transport::Context> pairs) {
    device_ = std::move(device);
    transportContext_ = std::move(pairs);
  }
};

// Creates the pairs for every peer; their addresses in the peers' order, and the length
// of one (Gloo's addresses of one transport have one length).
std::vector<char> CreatePairs(gloo::transport::Context& pairs, int rank, int size,
                              size_t* address_bytes) {
  std::vector<char> addresses;
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const std::vector<char> address = pairs.createPair(peer)->address().bytes();
    if (addresses.empty()) *address_bytes = address.size();
    if (address.size() != *address_bytes) {
      throw gloo::IoException(absl::StrCat("the pair for rank ", peer, " has an address of ",
                                           address.size(), " bytes, the first ", *address_bytes));
    }
    addresses.insert(addresses.end(), address.begin(), address.end());
  }
  return addresses;
}

// The wait for `keys`: the options' timeout, else the store's own bound (each batch its
// own, as Gloo gave each key's wait).
void WaitForKeys(gloo::rendezvous::Store& store, const std::vector<std::string>& keys,
                 const FullMeshOptions& options) {
  if (options.store_timeout.count() > 0) {
    store.wait(keys, options.store_timeout);
  } else {
    store.wait(keys);
  }
}

// Whether two pair addresses listen on one IP address (one host's, as each rank listens
// on its worker's data address).
bool SameHost(const std::vector<char>& a, const std::vector<char>& b) {
  const TcpAddress first(a);
  const TcpAddress second(b);
  const sockaddr_storage& x = first.getSockaddr();
  const sockaddr_storage& y = second.getSockaddr();
  if (x.ss_family != y.ss_family) return false;
  if (x.ss_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in&>(x).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(y).sin_addr.s_addr;
  }
  if (x.ss_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(x).sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(y).sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// Reads from every peer's key the address meant for this rank and connects the pair for
// it, kPeersPerRead peers at a time, in the peers' order (as Gloo's connect). Then sets
// each pair's local rank, as Gloo's connect does: the ranks below this one on its host
// (Gloo compares host names; here, the IP addresses the peers listen on).
void ConnectPairs(gloo::rendezvous::Store& store, gloo::transport::Context& pairs, int rank,
                  int size, size_t address_bytes, const FullMeshOptions& options) {
  const std::vector<char> own = pairs.getPair(rank == 0 ? 1 : 0)->address().bytes();
  int local_rank = 0;
  for (int first = 0; first < size; first += kPeersPerRead) {
    std::vector<int> peers;
    std::vector<std::string> keys;
    std::vector<StoreRead> reads;
    for (int peer = first; peer < std::min(size, first + kPeersPerRead); ++peer) {
      if (peer == rank) continue;
      peers.push_back(peer);
      keys.push_back(MeshAddressKey(peer));
      reads.push_back(PeerAddressRead(peer, rank, address_bytes));
    }
    if (peers.empty()) continue;
    WaitForKeys(store, keys, options);
    const std::vector<std::vector<char>> addresses = MultiGet(store, reads);
    for (size_t i = 0; i < peers.size(); ++i) {
      pairs.getPair(peers[i])->connect(addresses[i]);
      if (peers[i] < rank && SameHost(addresses[i], own)) ++local_rank;
    }
  }
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) pairs.getPair(peer)->setLocalRank(local_rank);
  }
}

}  // namespace

std::string MeshAddressKey(int rank) { return absl::StrCat("mesh/", rank); }

int PairIndex(int owner, int peer) { return peer < owner ? peer : peer - 1; }

StoreRead PeerAddressRead(int owner, int peer, size_t address_bytes) {
  StoreRead read;
  read.key = MeshAddressKey(owner);
  read.offset = static_cast<size_t>(PairIndex(owner, peer)) * address_bytes;
  read.length = address_bytes;
  return read;
}

absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectFullMesh(
    gloo::rendezvous::Store& store, const std::shared_ptr<gloo::transport::Device>& device,
    int rank, int size, const FullMeshOptions& options) {
  auto context = std::make_shared<MeshContext>(rank, size);
  try {
    std::shared_ptr<gloo::transport::Context> pairs = device->createContext(rank, size);
    pairs->setTimeout(options.pair_timeout);
    size_t address_bytes = 0;
    const std::vector<char> addresses = CreatePairs(*pairs, rank, size, &address_bytes);
    if (size > 1) {
      store.set(MeshAddressKey(rank), addresses);
      ConnectPairs(store, *pairs, rank, size, address_bytes, options);
    }
    context->Adopt(device, std::move(pairs));
  } catch (const std::exception& e) {
    return absl::UnavailableError(e.what());
  }
  return std::shared_ptr<gloo::Context>(std::move(context));
}

}  // namespace shardwise
