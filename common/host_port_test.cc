#include "common/host_port.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(HostPort, SplitsAndJoinsIpv4AndBracketedIpv6) {
  const std::optional<HostPort> v4 = SplitHostPort("10.0.0.1:7070");
  ASSERT_TRUE(v4.has_value());
  EXPECT_EQ(v4->host, "10.0.0.1");
  EXPECT_EQ(v4->port, 7070);
  const std::optional<HostPort> v6 = SplitHostPort("[::1]:0");
  ASSERT_TRUE(v6.has_value());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
  EXPECT_EQ(JoinHostPort("::1", 9090), "[::1]:9090");
  EXPECT_EQ(JoinHostPort("localhost", 9090), "localhost:9090");
}

TEST(HostPort, RefusesAddressesWithoutAHostOrAPortInRange) {
  for (const char* bad : {"7070", ":7070", "host:", "host:http", "host:-1", "host:65536"}) {
    EXPECT_FALSE(SplitHostPort(bad).has_value()) << bad;
  }
}

TEST(HostPort, TellsLoopbackAddressesFromOthers) {
  for (const char* loopback : {"127.0.0.1:7070", "127.3.4.5:1", "localhost:7070", "[::1]:7070",
                               "dns:///localhost:7070", "ipv4:127.0.0.1:7070"}) {
    EXPECT_TRUE(IsLoopbackAddress(loopback)) << loopback;
  }
  for (const char* other :
       {"0.0.0.0:7070", "10.0.0.1:7070", "shardwise-coordinator:7070", "[2001:db8::1]:7070",
        "dns:///example.com:443", "128.0.0.1:1", "127.example.com:7070", "127.0.0.1.nip.io:7070",
        "ipv4:127.0.0.1:1,10.0.0.5:7070", "::1:7070"}) {
    EXPECT_FALSE(IsLoopbackAddress(other)) << other;
  }
}

}  // namespace
}  // namespace shardwise
