#include "server/silent_sessions.h"

#include <memory>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// A session that records being ended; `said_hello` stands for its hello having arrived.
class Session final : public AwaitingHello {
 public:
  bool EndIfSilent(absl::Duration waited) override {
    if (said_hello || ended) return false;
    ended = true;
    waited_for = waited;
    return true;
  }
  bool said_hello = false;
  bool ended = false;
  absl::Duration waited_for;
};

TEST(SilentSessions, ASessionStillSilentAtItsTimeoutIsEndedAndOneThatSaidHelloIsNot) {
  SimulatedClock clock;
  SilentSessions silent(absl::Seconds(30), &clock);
  auto quiet = std::make_shared<Session>();
  auto greeted = std::make_shared<Session>();
  silent.Add(quiet);
  silent.Add(greeted);
  clock.Advance(absl::Seconds(10));
  auto later = std::make_shared<Session>();
  silent.Add(later);
  greeted->said_hello = true;

  clock.Advance(absl::Seconds(19));
  EXPECT_EQ(silent.EndOverdue(), 0);  // 29 s: every wait is still running
  EXPECT_FALSE(quiet->ended);
  EXPECT_EQ(silent.waiting(), 3u);

  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(silent.EndOverdue(), 1);
  EXPECT_TRUE(quiet->ended);
  EXPECT_EQ(quiet->waited_for, absl::Seconds(30));
  EXPECT_FALSE(greeted->ended);
  EXPECT_FALSE(later->ended);  // started 10 s after the others
  EXPECT_EQ(silent.waiting(), 1u);

  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(silent.EndOverdue(), 1);
  EXPECT_TRUE(later->ended);
  EXPECT_EQ(silent.waiting(), 0u);
}

TEST(SilentSessions, ASessionThatWentAwayIsForgotten) {
  SimulatedClock clock;
  SilentSessions silent(absl::Seconds(5), &clock);
  auto gone = std::make_shared<Session>();
  silent.Add(gone);
  gone.reset();
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(silent.EndOverdue(), 0);
  EXPECT_EQ(silent.waiting(), 0u);
}

}  // namespace
}  // namespace shardwise
