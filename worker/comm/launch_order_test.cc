// A ticket's turn comes once every earlier ticket was released, in whatever order they
// were released (a cancelled task releases its ticket before its turn), and a thread
// waiting for its turn goes on when it comes.

#include "worker/comm/launch_order.h"

#include <thread>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(LaunchOrder, TicketsComeInCallOrder) {
  LaunchOrder order;
  EXPECT_EQ(order.Take(), 0);
  EXPECT_EQ(order.Take(), 1);
  EXPECT_EQ(order.Take(), 2);
}

TEST(LaunchOrder, ATurnComesOnceEveryEarlierTicketWasReleased) {
  LaunchOrder order;
  const LaunchOrder::Ticket first = order.Take(), second = order.Take(), third = order.Take();
  EXPECT_TRUE(order.IsTurn(first));
  EXPECT_FALSE(order.IsTurn(second));
  order.Release(first);
  EXPECT_TRUE(order.IsTurn(second));
  EXPECT_FALSE(order.IsTurn(third));
  order.Release(second);
  EXPECT_TRUE(order.IsTurn(third));
}

TEST(LaunchOrder, ATicketReleasedBeforeItsTurnIsSkippedWhenItComes) {
  LaunchOrder order;
  const LaunchOrder::Ticket running = order.Take(), cancelled = order.Take(),
                            also_cancelled = order.Take(), next = order.Take();
  order.Release(also_cancelled);
  order.Release(cancelled);
  EXPECT_FALSE(order.IsTurn(next));  // `running` still launches
  order.Release(running);
  EXPECT_TRUE(order.IsTurn(next));
  order.Release(next);
  EXPECT_TRUE(order.IsTurn(order.Take()));
}

TEST(LaunchOrder, ASecondReleaseChangesNothing) {
  LaunchOrder order;
  const LaunchOrder::Ticket first = order.Take(), second = order.Take(), third = order.Take(),
                            fourth = order.Take();
  order.Release(first);
  order.Release(first);
  order.Release(third);  // early, as a cancelled task's
  EXPECT_FALSE(order.IsTurn(fourth));
  order.Release(second);
  EXPECT_TRUE(order.IsTurn(fourth));
}

TEST(LaunchOrder, AWaiterGoesOnWhenItsTurnComes) {
  LaunchOrder order;
  const LaunchOrder::Ticket first = order.Take(), second = order.Take();
  bool launched = false;
  std::thread waiter([&] {
    order.AwaitTurn(second);
    launched = true;
  });
  ASSERT_TRUE(order.AwaitWaiters(1, absl::Seconds(30)));
  order.Release(first);
  waiter.join();
  EXPECT_TRUE(launched);
  EXPECT_TRUE(order.AwaitWaiters(0, absl::ZeroDuration()));
}

}  // namespace
}  // namespace shardwise
