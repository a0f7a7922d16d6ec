#include "common/coordinator_address.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

std::string Check(const std::string& address) {
  const absl::Status status = CheckCoordinatorAddress("--coordinator", address);
  return status.ok() ? "ok" : std::string(status.message());
}

TEST(CoordinatorAddress, HostAndPortOrAGrpcTargetPass) {
  for (const char* good :
       {"127.0.0.1:7070", "shardwise-coordinator:7070", "[::1]:7070", "a.b.example:1", "h:65535",
        "dns:///coordinator:7070", "unix:/run/shardwise.sock", "ipv4:10.0.0.1:7070"}) {
    EXPECT_EQ(Check(good), "ok") << good;
  }
}

// gRPC itself would dial port 99999 - 65536 = 34463, or port 0 for no port at all.
TEST(CoordinatorAddress, MistakesAreNamedWithTheValue) {
  EXPECT_EQ(Check("127.0.0.1:99999"),
            "--coordinator: '127.0.0.1:99999' has port '99999', not one from 1 to 65535 "
            "(expected HOST:PORT)");
  EXPECT_EQ(Check("127.0.0.1"), "--coordinator: '127.0.0.1' has no port (expected HOST:PORT)");
  EXPECT_EQ(Check(":7070"), "--coordinator: ':7070' has no host (expected HOST:PORT)");
  EXPECT_EQ(Check(""), "--coordinator: '' is empty (expected HOST:PORT)");
  for (const char* bad : {"h:0", "h:", "h:70a", "h:-1", "h:000007070", "h:+80"}) {
    EXPECT_NE(Check(bad).find("not one from 1 to 65535"), std::string::npos) << bad;
  }
  EXPECT_NE(Check("::1:7070").find("an IPv6 address goes in brackets"), std::string::npos);
  EXPECT_NE(Check("[::1:7070").find("an IPv6 address goes in brackets"), std::string::npos);
  EXPECT_EQ(Check("bad host:1"),
            "--coordinator: 'bad host:1' has a space or control character in its host "
            "(expected HOST:PORT)");
  EXPECT_EQ(Check("h\n:1"),
            "--coordinator: 'h\\u{000A}:1' has a space or control character in its host "
            "(expected HOST:PORT)");
}

TEST(CoordinatorAddress, TheFlagThenTheEnvironmentThenTheDefaultEachNamedWhenWrong) {
  ::unsetenv(kCoordinatorEnvVar);
  EXPECT_EQ(*ResolveCoordinatorAddress(""), kDefaultCoordinatorAddress);
  ::setenv(kCoordinatorEnvVar, "env-host:7071", 1);
  EXPECT_EQ(*ResolveCoordinatorAddress(""), "env-host:7071");
  EXPECT_EQ(*ResolveCoordinatorAddress("flag-host:7072"), "flag-host:7072");
  ::setenv(kCoordinatorEnvVar, "env-host", 1);
  EXPECT_EQ(ResolveCoordinatorAddress("").status().message(),
            "$SHARDWISE_COORDINATOR: 'env-host' has no port (expected HOST:PORT)");
  EXPECT_EQ(ResolveCoordinatorAddress("h:1:2").status().message(),
            "--coordinator: 'h:1:2' is not HOST:PORT (an IPv6 address goes in brackets: "
            "[::1]:7070) (expected HOST:PORT)");
  ::unsetenv(kCoordinatorEnvVar);
}

}  // namespace
}  // namespace shardwise
