// ConnectGlooContext's connect timeout: a peer that published its address and then gave
// the rendezvous up (a superseded membership epoch) never connects; Gloo's TCP pair waits
// 5 times its context's timeout for that, so the connect timeout bounds it.

#include "worker/comm/data_plane.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <chrono>
#include <cstring>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/address.h"
#include "gtest/gtest.h"
#include "worker/comm/full_mesh.h"

namespace shardwise {
namespace {

// Rank 1's address as a peer that gave up would leave it: the highest port, so that rank
// 0 is always the pair's listening side (Gloo: the lower address listens) and waits.
std::vector<char> AbandonedPeerAddress() {
  sockaddr_storage storage{};
  auto* in = reinterpret_cast<sockaddr_in*>(&storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(65535);
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return gloo::transport::tcp::Address(storage, 1).bytes();
}

// Rank 0 of 2 connecting against the abandoned peer: how long until it gives up.
absl::StatusOr<std::chrono::milliseconds> TimeToFail(const DataPlaneOptions& options) {
  gloo::rendezvous::HashStore store;
  store.set(MeshAddressKey(1), AbandonedPeerAddress());
  const auto start = std::chrono::steady_clock::now();
  auto context = ConnectGlooContext(store, 0, 2, options);
  if (context.ok()) return absl::InternalError("connected to a peer that never connects");
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

// With the data plane's 60 s timeout Gloo alone would wait 5 minutes, past this test's
// own time limit: that it returns at all is the check (no bound on the wall time).
TEST(ConnectGlooContext, AConnectTimeoutEndsTheWaitForAPeerThatGaveUp) {
  DataPlaneOptions options;
  options.timeout = std::chrono::milliseconds(60000);
  options.connect_timeout = std::chrono::milliseconds(100);
  EXPECT_TRUE(TimeToFail(options).ok());
}

// Why the option exists: without it the pair waits 5 times the context's timeout (a lower
// bound, which load cannot break).
TEST(ConnectGlooContext, WithoutOneAPairWaitsFiveTimesTheTimeout) {
  DataPlaneOptions options;
  options.timeout = std::chrono::milliseconds(200);
  const auto waited = TimeToFail(options);
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_GE(*waited, std::chrono::milliseconds(900));
}

}  // namespace
}  // namespace shardwise
