#include "server/unread_messages.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1000);

TEST(UnreadMessages, AMessageIsUnreadFromWhenItWasSeenWrittenUntilAHeartbeatCountsIt) {
  UnreadMessages unread;
  EXPECT_EQ(unread.OldestUnreadSince(), std::nullopt);
  unread.Written(1, kStart);
  unread.Written(1, kStart + absl::Seconds(1));  // the same message, seen again
  unread.Written(3, kStart + absl::Seconds(2));
  EXPECT_EQ(unread.OldestUnreadSince(), kStart);
  unread.Read(1);
  EXPECT_EQ(unread.OldestUnreadSince(), kStart + absl::Seconds(2));
  unread.Read(2);  // one of the two written together: the rest still waits from then
  EXPECT_EQ(unread.OldestUnreadSince(), kStart + absl::Seconds(2));
  unread.Read(3);
  EXPECT_EQ(unread.OldestUnreadSince(), std::nullopt);
  unread.Read(2);  // a late heartbeat counts nothing back
  EXPECT_EQ(unread.OldestUnreadSince(), std::nullopt);
}

// A heartbeat may count a message before the registry's poll sees it written: the worker
// read it, so it never waits.
TEST(UnreadMessages, AReadReportedBeforeTheWriteWasSeenLeavesNothingWaiting) {
  UnreadMessages unread;
  unread.Read(2);
  unread.Written(2, kStart);
  EXPECT_EQ(unread.OldestUnreadSince(), std::nullopt);
  unread.Written(3, kStart + absl::Seconds(1));
  EXPECT_EQ(unread.OldestUnreadSince(), kStart + absl::Seconds(1));
}

// Past its bound the newest entry moves on: the oldest keeps its time, and the messages
// merged into the newest are dated later, never earlier, than written.
TEST(UnreadMessages, PastItsBoundTheNewestEntryTakesTheNewerWrites) {
  UnreadMessages unread;
  const uint64_t entries = UnreadMessages::kMaxEntries;
  for (uint64_t i = 1; i <= entries + 10; ++i) unread.Written(i, kStart + absl::Seconds(i));
  EXPECT_EQ(unread.OldestUnreadSince(), kStart + absl::Seconds(1));
  unread.Read(entries - 1);
  // The last entry holds the writes from `entries` on, dated by the newest of them.
  EXPECT_EQ(unread.OldestUnreadSince(), kStart + absl::Seconds(entries + 10));
  unread.Read(entries + 10);
  EXPECT_EQ(unread.OldestUnreadSince(), std::nullopt);
}

}  // namespace
}  // namespace shardwise
