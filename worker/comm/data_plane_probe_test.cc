#include "worker/comm/data_plane_probe.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A port on loopback that nothing listens on: a privileged one no test binds (a freed
// ephemeral port could be another test's listener by the time it is probed, and this
// Gloo's TCP pairs take any connection for their peer's).
std::string ClosedAddress() { return "127.0.0.1:1"; }

TEST(DataPlaneProbe, ReachesAListenerAndNamesWhyAPeerWasNot) {
  auto listener = DataPlaneProbeListener::Start("127.0.0.1");
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_EQ((*listener)->address().rfind("127.0.0.1:", 0), 0u) << (*listener)->address();
  const std::vector<ProbeOutcome> outcomes = ProbePeers(
      {{0, (*listener)->address()}, {2, ClosedAddress()}, {3, "no-port"}}, absl::Seconds(2));
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].rank, 0);
  EXPECT_TRUE(outcomes[0].reached) << outcomes[0].error;
  EXPECT_EQ(outcomes[1].rank, 2);
  EXPECT_FALSE(outcomes[1].reached);
  EXPECT_EQ(outcomes[1].error, "Connection refused");
  EXPECT_FALSE(outcomes[2].reached);
  EXPECT_EQ(outcomes[2].error, "no probe address (\"no-port\")");
  // The listener goes on accepting: probed again, it is reached again.
  EXPECT_TRUE(ProbePeers({{0, (*listener)->address()}}, absl::Seconds(2))[0].reached);
}

// A name is advertised as the address it bound: peers need not resolve it as this host
// does, and the coordinator tells the ranks of one host by it.
TEST(DataPlaneProbe, AListenerOnANameAdvertisesTheAddressItBound) {
  auto listener = DataPlaneProbeListener::Start("localhost");
  ASSERT_TRUE(listener.ok()) << listener.status();
  const std::string& address = (*listener)->address();
  EXPECT_TRUE(address.rfind("127.", 0) == 0 || address.rfind("[::1]:", 0) == 0) << address;
  EXPECT_TRUE(ProbePeers({{0, address}}, absl::Seconds(2))[0].reached);
}

TEST(DataPlaneProbe, AListenerOnAnAddressThisHostLacksIsRefused) {
  auto listener = DataPlaneProbeListener::Start("192.0.2.1");  // TEST-NET-1, not ours
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(listener.status().message().find("data-plane probes: cannot listen on 192.0.2.1"),
            std::string::npos)
      << listener.status();
  // As the worker checks its --data_address before it starts.
  EXPECT_TRUE(DataPlaneProbeListener::CheckListenable("127.0.0.1").ok());
  const absl::Status refused = DataPlaneProbeListener::CheckListenable("192.0.2.1");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("cannot listen on 192.0.2.1: "), std::string::npos) << refused;
}

}  // namespace
}  // namespace shardwise
