#include "server/serial_executor.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(SerialExecutor, RunsTasksOneAtATimeInTheOrderPosted) {
  SerialExecutor executor;
  std::vector<int> ran;  // written by the executor's thread only
  absl::Notification done;
  for (int i = 0; i < 100; ++i) executor.Post([&ran, i] { ran.push_back(i); });
  // A task may post more: it runs after what was queued before it.
  executor.Post([&] { executor.Post([&] { done.Notify(); }); });
  done.WaitForNotification();
  ASSERT_EQ(ran.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(ran[i], i);
}

TEST(SerialExecutor, RunsWhatWasPostedBeforeItIsDestroyed) {
  int ran = 0;
  {
    SerialExecutor executor;
    for (int i = 0; i < 1000; ++i) executor.Post([&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 1000);
}

// What heartbeats post: a key's task is queued once however often it is asked for, and
// asked for again once it has started.
TEST(SerialExecutor, PostsATaskPerKeyOnceUntilItRuns) {
  SerialExecutor executor;
  absl::Notification hold, held;
  executor.Post([&] {
    held.Notify();
    hold.WaitForNotification();
  });
  held.WaitForNotification();
  int a = 0, b = 0;  // written by the executor's thread only
  for (int i = 0; i < 1000; ++i) {
    executor.PostOnce("a", [&a] { ++a; });
    executor.PostOnce("b", [&b] { ++b; });
  }
  EXPECT_EQ(executor.queued(), 2u);
  hold.Notify();
  absl::Notification done;
  executor.Post([&] { done.Notify(); });
  done.WaitForNotification();
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
  executor.PostOnce("a", [&a] { ++a; });  // it ran: asked again, queued again
  absl::Notification again;
  executor.Post([&] { again.Notify(); });
  again.WaitForNotification();
  EXPECT_EQ(a, 2);
}

TEST(SerialExecutor, DropsTasksPostedAfterShutdown) {
  SerialExecutor executor;
  executor.Shutdown();
  bool ran = false;
  executor.Post([&] { ran = true; });
  EXPECT_EQ(executor.queued(), 0u);
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace shardwise
