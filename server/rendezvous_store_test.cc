#include "server/rendezvous_store.h"

#include <cstdint>
#include <thread>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(RendezvousStore, SetGetAddWithinAScope) {
  RendezvousStore store;
  store.OpenScope("job-1", 1);
  ASSERT_TRUE(store.Set("job-1", 1, "rank0", "addr0").ok());
  auto value = store.Get("job-1", 1, "rank0");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "addr0");
  EXPECT_EQ(store.Get("job-1", 1, "rank1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store.Add("job-1", 1, "count", 2), 2);
  EXPECT_EQ(*store.Add("job-1", 1, "count", 3), 5);
  // Found by tests/fuzz (corpus/coordinator/rpcs.bin): a sum past 64 bits is refused.
  EXPECT_EQ(store.Add("job-1", 1, "count", INT64_MAX).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*store.Add("job-1", 1, "count", 0), 5);
  EXPECT_EQ(store.Add("job-1", 1, "rank0", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(RendezvousStore, ScopesAreIsolatedPerAttempt) {
  RendezvousStore store;
  store.OpenScope("job-1", 1);
  store.OpenScope("job-1", 2);
  ASSERT_TRUE(store.Set("job-1", 1, "k", "old").ok());
  EXPECT_EQ(store.Get("job-1", 2, "k").status().code(), absl::StatusCode::kNotFound);
  store.CloseScope("job-1", 1);
  EXPECT_EQ(store.Set("job-1", 1, "k", "late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Get("job-9", 1, "k").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RendezvousStore, WaitReturnsWhenAllKeysAreSet) {
  RendezvousStore store;
  store.OpenScope("j", 1);
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(30));
    EXPECT_TRUE(store.Set("j", 1, "a", "1").ok());
    absl::SleepFor(absl::Milliseconds(30));
    EXPECT_TRUE(store.Set("j", 1, "b", "2").ok());
  });
  EXPECT_TRUE(store.Wait("j", 1, {"a", "b"}, absl::Seconds(10)).ok());
  setter.join();
}

TEST(RendezvousStore, WaitTimesOutNamingMissingKeys) {
  RendezvousStore store;
  store.OpenScope("j", 1);
  ASSERT_TRUE(store.Set("j", 1, "a", "1").ok());
  absl::Status status = store.Wait("j", 1, {"a", "b"}, absl::Milliseconds(30));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("b"), std::string::npos);
}

TEST(RendezvousStore, WaitIsAbortedWhenTheAttemptEnds) {
  RendezvousStore store;
  store.OpenScope("j", 1);
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    store.CloseScope("j", 1);
  });
  EXPECT_EQ(store.Wait("j", 1, {"never"}, absl::Seconds(10)).code(), absl::StatusCode::kAborted);
  closer.join();
}

TEST(RendezvousStore, EnforcesLimits) {
  RendezvousStore::Limits limits;
  limits.max_value_bytes = 4;
  limits.max_keys_per_scope = 2;
  RendezvousStore store(limits);
  store.OpenScope("j", 1);
  EXPECT_EQ(store.Set("j", 1, "k", "12345").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.Set("j", 1, "", "1").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set("j", 1, "a", "1").ok());
  ASSERT_TRUE(store.Set("j", 1, "b", "1").ok());
  EXPECT_EQ(store.Set("j", 1, "c", "1").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(store.Set("j", 1, "a", "2").ok());  // overwriting is not a new key
}

}  // namespace
}  // namespace shardwise
