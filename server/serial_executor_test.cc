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
