#include "server/data_plane_blame.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// Rank `prober`'s probe: `reached` ranks reached, `missed` ones timed out.
v1::DataPlaneProbeResult Probe(int32_t prober, const std::vector<int32_t>& reached,
                               const std::vector<int32_t>& missed) {
  v1::DataPlaneProbeResult probe;
  probe.set_rank(prober);
  for (int32_t rank : reached) {
    auto* outcome = probe.add_outcomes();
    outcome->set_rank(rank);
    outcome->set_reached(true);
  }
  for (int32_t rank : missed) {
    auto* outcome = probe.add_outcomes();
    outcome->set_rank(rank);
    outcome->set_error("timed out after 2s");
  }
  return probe;
}

std::vector<int32_t> Ranks(const std::vector<UnreachableRank>& blamed) {
  std::vector<int32_t> ranks;
  ranks.reserve(blamed.size());
  for (const UnreachableRank& u : blamed) ranks.push_back(u.rank);
  return ranks;
}

// Rank 2's inbound port is blocked: no one reaches it, though it reaches everyone.
TEST(DataPlaneBlame, TheRankNoOtherReachesIsBlamedWithWhyEachFailed) {
  const std::vector<UnreachableRank> blamed = BlameUnreachableRanks(
      3, {{0, Probe(0, {1}, {2})}, {1, Probe(1, {0}, {2})}, {2, Probe(2, {0, 1}, {})}});
  ASSERT_EQ(Ranks(blamed), std::vector<int32_t>{2});
  EXPECT_EQ(TriedBy(blamed[0]), "rank 0 (timed out after 2s), rank 1 (timed out after 2s)");
  // Its own probe need not come back (its worker hung after the rendezvous).
  EXPECT_EQ(Ranks(BlameUnreachableRanks(3, {{0, Probe(0, {1}, {2})}, {1, Probe(1, {0}, {2})}})),
            std::vector<int32_t>{2});
  // Of two ranks, the one the other cannot reach, when it reaches the other.
  EXPECT_EQ(Ranks(BlameUnreachableRanks(2, {{0, Probe(0, {}, {1})}, {1, Probe(1, {0}, {})}})),
            std::vector<int32_t>{1});
}

// One rank that reaches it clears a rank: the others' failures are theirs or the
// network's, not its port's. A partition, or every rank unreachable, blames no one.
TEST(DataPlaneBlame, NoOneIsBlamedWhenSomeoneReachesThemOrEveryoneIsCutOff) {
  EXPECT_TRUE(
      BlameUnreachableRanks(
          3, {{0, Probe(0, {1}, {2})}, {1, Probe(1, {0, 2}, {})}, {2, Probe(2, {0, 1}, {})}})
          .empty());
  EXPECT_TRUE(BlameUnreachableRanks(4, {{0, Probe(0, {1}, {2, 3})},
                                        {1, Probe(1, {0}, {2, 3})},
                                        {2, Probe(2, {3}, {0, 1})},
                                        {3, Probe(3, {2}, {0, 1})}})
                  .empty());
  EXPECT_TRUE(BlameUnreachableRanks(2, {{0, Probe(0, {}, {1})}, {1, Probe(1, {}, {0})}}).empty());
  EXPECT_TRUE(BlameUnreachableRanks(3, {}).empty()) << "no probe came back: nothing to go on";
  EXPECT_TRUE(BlameUnreachableRanks(3, {{0, Probe(0, {1}, {2})}}).empty())
      << "rank 0 alone could not reach rank 2: rank 0's own egress may be at fault";
}

// A prober that names a rank twice (a worker of another release, or one sending what it
// likes) is still one prober: it alone cannot get the rank quarantined.
TEST(DataPlaneBlame, AProberCountsOnceHoweverOftenItNamesARank) {
  EXPECT_TRUE(BlameUnreachableRanks(3, {{0, Probe(0, {1}, {2, 2})}}).empty());
  const std::vector<UnreachableRank> blamed = BlameUnreachableRanks(
      3, {{0, Probe(0, {1}, {2, 2})}, {1, Probe(1, {0}, {2})}, {2, Probe(2, {0, 1}, {})}});
  ASSERT_EQ(Ranks(blamed), std::vector<int32_t>{2});
  EXPECT_EQ(blamed[0].tried_by.size(), 2u);
}

// Two hosts of two workers each, the second's firewall dropping its peers' connections:
// its ranks reach each other on their own host, which does not clear them; the first
// host's ranks, reached from the second, are not blamed. On loopback (one machine) a
// shared host says nothing.
TEST(DataPlaneBlame, ARankOnTheTargetsOwnHostNeitherClearsNorBlamesIt) {
  const std::map<int32_t, v1::DataPlaneProbeResult> probes = {{0, Probe(0, {1}, {2, 3})},
                                                              {1, Probe(1, {0}, {2, 3})},
                                                              {2, Probe(2, {0, 1, 3}, {})},
                                                              {3, Probe(3, {0, 1, 2}, {})}};
  const std::vector<std::string> hosts = {"10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"};
  EXPECT_EQ(Ranks(BlameUnreachableRanks(4, probes, hosts)), (std::vector<int32_t>{2, 3}));
  EXPECT_TRUE(BlameUnreachableRanks(4, probes).empty()) << "hosts unknown: each is cleared";
  EXPECT_TRUE(BlameUnreachableRanks(4, probes, {"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.1"})
                  .empty());
  // A host's only other prober on its own host: not enough probers left to blame.
  EXPECT_TRUE(BlameUnreachableRanks(3, {{0, Probe(0, {1}, {2})}, {1, Probe(1, {0}, {2})}},
                                    {"10.0.0.1", "10.0.0.2", "10.0.0.2"})
                  .empty());
}

}  // namespace
}  // namespace shardwise
