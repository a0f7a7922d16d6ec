#include "server/rendezvous_store.h"

#include <cstdint>
#include <thread>
#include <tuple>
#include <utility>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// The scope a call names: job, attempt and the caller's token ("t0" is rank 0's, ...).
v1::RendezvousScope As(const std::string& job, int32_t attempt, const std::string& token = "t0") {
  v1::RendezvousScope scope;
  scope.set_job_id(job);
  scope.set_attempt(attempt);
  scope.set_token(token);
  return scope;
}

const std::vector<std::string> kTokens = {"t0", "t1", "t2"};

TEST(RendezvousStore, SetGetAddWithinAScope) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, kTokens);
  ASSERT_TRUE(store.Set(As("job-1", 1), "rank0", "addr0").ok());
  auto value = store.Get(As("job-1", 1), "rank0");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, "addr0");
  EXPECT_EQ(store.Get(As("job-1", 1), "rank1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*store.Add(As("job-1", 1), "count", 2), 2);
  EXPECT_EQ(*store.Add(As("job-1", 1), "count", 3), 5);
  // Found by tests/fuzz (corpus/coordinator/rpcs.bin): a sum past 64 bits is refused.
  EXPECT_EQ(store.Add(As("job-1", 1), "count", INT64_MAX).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(*store.Add(As("job-1", 1), "count", 0), 5);
  EXPECT_EQ(store.Add(As("job-1", 1), "rank0", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

RendezvousStore::Reads Reads(const std::vector<std::tuple<std::string, int64_t, int64_t>>& reads) {
  RendezvousStore::Reads out;
  for (const auto& [key, offset, length] : reads) {
    v1::RendezvousRead* read = out.Add();
    read->set_key(key);
    read->set_offset(offset);
    read->set_length(length);
  }
  return out;
}

TEST(RendezvousStore, GetManyReadsPartsOfKeysInOrder) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, kTokens);
  ASSERT_TRUE(store.Set(As("job-1", 1), "a", "0123").ok());
  ASSERT_TRUE(store.Set(As("job-1", 1), "b", "xyz").ok());
  auto values = store.GetMany(As("job-1", 1, "t2"), Reads({{"b", 0, 0}, {"a", 1, 2}, {"a", 4, 0}}));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"xyz", "12", ""}));

  const auto unset = store.GetMany(As("job-1", 1), Reads({{"a", 0, 0}, {"c", 0, 0}}));
  EXPECT_EQ(unset.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unset.status().message().find("'c'"), std::string::npos) << unset.status();
  const auto past = store.GetMany(As("job-1", 1), Reads({{"a", 0, 0}, {"b", 2, 2}}));
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(past.status().message().find("reads[1]: key 'b' has 3 bytes, read 2 from offset 2"),
            std::string::npos)
      << past.status();
  EXPECT_EQ(store.GetMany(As("job-1", 1), Reads({{"a", -1, 0}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.GetMany(As("job-1", 1, "t9"), Reads({{"a", 0, 0}})).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(RendezvousStore, GetManyRefusesMoreReadsOrBytesThanItsBounds) {
  RendezvousStore::Limits limits;
  limits.max_keys_per_wait = 2;
  limits.max_reply_bytes = 5;
  RendezvousStore store(limits);
  store.OpenScope("job-1", 1, kTokens);
  ASSERT_TRUE(store.Set(As("job-1", 1), "a", "0123").ok());
  EXPECT_EQ(
      store.GetMany(As("job-1", 1), Reads({{"a", 0, 0}, {"a", 0, 0}, {"a", 0, 0}})).status().code(),
      absl::StatusCode::kInvalidArgument);
  const auto large = store.GetMany(As("job-1", 1), Reads({{"a", 0, 0}, {"a", 0, 2}}));
  EXPECT_EQ(large.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(store.GetMany(As("job-1", 1), Reads({{"a", 0, 0}, {"a", 0, 1}})).ok());
}

// The defaults hold jobs of 1024 ranks; larger worlds raise what a full mesh needs, up to
// half the host's memory.
TEST(RendezvousStoreLimits, GrowWithTheLargestWorldWithinHalfTheMemory) {
  constexpr size_t kGiB = size_t{1} << 30;
  const RendezvousStore::Limits defaults;
  const RendezvousStore::Limits small = RendezvousStore::Limits::ForWorldsOf(1024, 64 * kGiB);
  EXPECT_EQ(small.max_keys_per_scope, defaults.max_keys_per_scope);
  EXPECT_EQ(small.max_value_bytes, defaults.max_value_bytes);
  EXPECT_EQ(small.max_bytes_per_scope, defaults.max_bytes_per_scope);
  const RendezvousStore::Limits large = RendezvousStore::Limits::ForWorldsOf(8192, 64 * kGiB);
  const size_t mesh = size_t{8192} * 8191 * 136;  // one context's addresses
  EXPECT_EQ(large.max_bytes_per_scope, RendezvousStore::Limits::MeshBytesPerAttempt(8192));
  EXPECT_GE(large.max_bytes_per_scope, 2 * mesh);
  EXPECT_GE(large.max_bytes, large.max_bytes_per_scope);
  EXPECT_LE(large.max_bytes, 32 * kGiB);
  EXPECT_GE(large.max_keys_per_scope, size_t{8} * 8192);
  EXPECT_GE(large.max_waits_per_scope, size_t{8192});
  const RendezvousStore::Limits huge = RendezvousStore::Limits::ForWorldsOf(1 << 16, 64 * kGiB);
  EXPECT_GE(huge.max_value_bytes, size_t{65535} * 136);
  EXPECT_EQ(huge.max_bytes, 32 * kGiB);
  EXPECT_EQ(huge.max_bytes_per_scope, 32 * kGiB);
  const RendezvousStore::Limits small_host = RendezvousStore::Limits::ForWorldsOf(8192, kGiB);
  EXPECT_EQ(small_host.max_bytes, defaults.max_bytes);
}

TEST(RendezvousStore, ScopesAreIsolatedPerAttempt) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, kTokens);
  store.OpenScope("job-1", 2, kTokens);
  ASSERT_TRUE(store.Set(As("job-1", 1), "k", "old").ok());
  EXPECT_EQ(store.Get(As("job-1", 2), "k").status().code(), absl::StatusCode::kNotFound);
  store.CloseScope("job-1", 1);
  EXPECT_EQ(store.Set(As("job-1", 1), "k", "late").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Get(As("job-9", 1), "k").status().code(), absl::StatusCode::kFailedPrecondition);
}

// A restarted coordinator re-admits re-attached ranks one by one: each may use the scope
// once admitted, with its own token only.
TEST(RendezvousStore, ReadmitsRanksOfAnAttemptOneByOne) {
  RendezvousStore store;
  store.AdmitRank("job-1", 1, 0, "t0");
  ASSERT_TRUE(store.Set(As("job-1", 1, "t0"), "epoch1/rank0", "addr0").ok());
  EXPECT_EQ(store.Get(As("job-1", 1, "t1"), "epoch1/rank0").status().code(),
            absl::StatusCode::kPermissionDenied);
  store.AdmitRank("job-1", 1, 1, "t1");
  store.AdmitRank("job-1", 1, 2, "");  // an empty token admits nobody
  EXPECT_EQ(*store.Get(As("job-1", 1, "t1"), "epoch1/rank0"), "addr0");
  EXPECT_EQ(store.Get(As("job-1", 1, ""), "epoch1/rank0").status().code(),
            absl::StatusCode::kPermissionDenied);
  store.CloseScope("job-1", 1);
  EXPECT_EQ(store.Get(As("job-1", 1, "t1"), "epoch1/rank0").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A rank admitted with a new token (a replacement on another worker) is that token's
// alone: the lost worker's may no longer read or write the attempt's keys, and the
// scope still counts the ranks it has, not the tokens it was given.
TEST(RendezvousStore, AReplacedRanksOldTokenIsRevoked) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, kTokens);
  store.AdmitRank("job-1", 1, 2, "t2-replacement");
  EXPECT_EQ(store.Get(As("job-1", 1, "t2"), "k").status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(store.Set(As("job-1", 1, "t2-replacement"), "k", "v").ok());
  store.AdmitRank("job-1", 1, 1, "t1");  // a re-attached rank keeps its own
  EXPECT_EQ(*store.Get(As("job-1", 1, "t1"), "k"), "v");
  EXPECT_EQ(store.RanksNotReached("job-1", 1), (std::vector<int32_t>{0}));  // no rank 3
}

// The replaced holder's pending waits end with it (ABORTED), so they no longer count
// against the rank's bounded number of waits; a re-attached rank's own waits stay.
TEST(RendezvousStore, AReplacedRanksWaitsEnd) {
  RendezvousStore::Limits limits;
  limits.max_waits_per_rank = 1;
  RendezvousStore store(limits);
  store.OpenScope("job-1", 1, kTokens);
  absl::Status old_holder = absl::UnknownError("pending"), kept = absl::UnknownError("pending");
  store.WaitAsync(As("job-1", 1, "t2"), {"x"}, [&](absl::Status s) { old_holder = std::move(s); });
  store.WaitAsync(As("job-1", 1, "t1"), {"x"}, [&](absl::Status s) { kept = std::move(s); });
  store.AdmitRank("job-1", 1, 1, "t1");
  store.AdmitRank("job-1", 1, 2, "t2-replacement");
  EXPECT_EQ(old_holder.code(), absl::StatusCode::kAborted);
  EXPECT_NE(old_holder.message().find("rank 2 of attempt 1 of job 'job-1' was admitted on "
                                      "another worker"),
            std::string::npos)
      << old_holder;
  EXPECT_EQ(kept.code(), absl::StatusCode::kUnknown);  // still pending
  absl::Status replacement = absl::UnknownError("pending");
  store.WaitAsync(As("job-1", 1, "t2-replacement"), {"x"},
                  [&](absl::Status s) { replacement = std::move(s); });
  ASSERT_TRUE(store.Set(As("job-1", 1, "t0"), "x", "1").ok());
  EXPECT_TRUE(replacement.ok()) << replacement;
  EXPECT_TRUE(kept.ok()) << kept;
}

// Ranks that left a fault-tolerant attempt (their group did) lose its rendezvous: their
// tokens are refused and their waits end, while the ranks that train on keep theirs.
TEST(RendezvousStore, RanksThatLeftAreRevoked) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, {"t0", "t1", "t2", "t3"});
  absl::Status left_wait = absl::UnknownError("pending"), live_wait = absl::UnknownError("pending");
  store.WaitAsync(As("job-1", 1, "t2"), {"epoch1/x"},
                  [&](absl::Status s) { left_wait = std::move(s); });
  store.WaitAsync(As("job-1", 1, "t0"), {"epoch1/x"},
                  [&](absl::Status s) { live_wait = std::move(s); });
  store.RevokeRanks("job-1", 1, {2, 3});
  store.RevokeRanks("job-2", 1, {0});  // no such scope: nothing happens
  // Still ranks of the attempt, whose tokens are gone: the world is what the scope opened.
  EXPECT_EQ(store.RanksNotReached("job-1", 1), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(left_wait.code(), absl::StatusCode::kAborted);
  EXPECT_NE(left_wait.message().find("left attempt 1 of job 'job-1'"), std::string::npos)
      << left_wait;
  for (const char* token : {"t2", "t3"}) {
    EXPECT_EQ(store.Set(As("job-1", 1, token), "epoch1/x", "stale").code(),
              absl::StatusCode::kPermissionDenied)
        << token;
  }
  ASSERT_TRUE(store.Set(As("job-1", 1, "t1"), "epoch1/x", "1").ok());
  EXPECT_TRUE(live_wait.ok()) << live_wait;
  EXPECT_EQ(*store.Get(As("job-1", 1, "t0"), "epoch1/x"), "1");
  store.AdmitRank("job-1", 1, 2, "t2-replacement");  // a replacement group's rank
  EXPECT_TRUE(store.Get(As("job-1", 1, "t2-replacement"), "epoch1/x").ok());
}

// Any call with a rank's token counts as that rank reaching the rendezvous, a refused
// one too (it came); a caller without a token is nobody's.
TEST(RendezvousStore, KnowsWhichRanksNeverCame) {
  RendezvousStore store;
  EXPECT_TRUE(store.RanksNotReached("job-1", 1).empty());  // no such scope
  store.OpenScope("job-1", 1, kTokens);
  EXPECT_EQ(store.RanksNotReached("job-1", 1), (std::vector<int32_t>{0, 1, 2}));
  ASSERT_TRUE(store.Set(As("job-1", 1, "t2"), "rank2", "addr2").ok());
  EXPECT_EQ(store.Get(As("job-1", 1, "t0"), "rank1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.Get(As("job-1", 1, "stranger"), "rank1").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(store.RanksNotReached("job-1", 1), (std::vector<int32_t>{1}));
  store.CloseScope("job-1", 1);
  EXPECT_TRUE(store.RanksNotReached("job-1", 1).empty());
}

TEST(RendezvousStore, WaitReturnsWhenAllKeysAreSet) {
  RendezvousStore store;
  store.OpenScope("j", 1, kTokens);
  std::thread setter([&] {
    absl::SleepFor(absl::Milliseconds(30));
    EXPECT_TRUE(store.Set(As("j", 1), "a", "1").ok());
    absl::SleepFor(absl::Milliseconds(30));
    EXPECT_TRUE(store.Set(As("j", 1), "b", "2").ok());
  });
  EXPECT_TRUE(store.Wait(As("j", 1), {"a", "b"}, absl::Seconds(10)).ok());
  // Returned with both keys there (that it returns only then, not before, is
  // AsyncWaitsCompleteOnceWhenTheirLastKeyIsSet's: the blocking Wait awaits its callback).
  EXPECT_EQ(store.Get(As("j", 1), "a").value_or(""), "1");
  EXPECT_EQ(store.Get(As("j", 1), "b").value_or(""), "2");
  setter.join();
}

TEST(RendezvousStore, WaitTimesOutNamingMissingKeys) {
  RendezvousStore store;
  store.OpenScope("j", 1, kTokens);
  ASSERT_TRUE(store.Set(As("j", 1), "a", "1").ok());
  absl::Status status = store.Wait(As("j", 1), {"a", "b"}, absl::Milliseconds(30));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(status.message().find("b"), std::string::npos);
}

TEST(RendezvousStore, WaitIsAbortedWhenTheAttemptEnds) {
  RendezvousStore store;
  store.OpenScope("j", 1, kTokens);
  std::thread closer([&] {
    absl::SleepFor(absl::Milliseconds(30));
    store.CloseScope("j", 1);
  });
  EXPECT_EQ(store.Wait(As("j", 1), {"never"}, absl::Seconds(10)).code(),
            absl::StatusCode::kAborted);
  closer.join();
}

TEST(RendezvousStore, EnforcesLimits) {
  RendezvousStore::Limits limits;
  limits.max_value_bytes = 4;
  limits.max_keys_per_scope = 2;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  EXPECT_EQ(store.Set(As("j", 1), "k", "12345").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Set(As("j", 1), "", "1").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store.Set(As("j", 1), "a", "1").ok());
  ASSERT_TRUE(store.Set(As("j", 1), "b", "1").ok());
  EXPECT_EQ(store.Set(As("j", 1), "c", "1").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store.Set(As("j", 1), "a", "2").ok());  // overwriting is not a new key
}

// The bytes keys and values hold are bounded per attempt and across attempts; a value
// replaced, an epoch's keys dropped and an attempt closed give theirs back.
TEST(RendezvousStore, BoundsTheBytesItHolds) {
  RendezvousStore::Limits limits;
  limits.max_bytes_per_scope = 100;
  limits.max_bytes = 150;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  store.OpenScope("j", 2, kTokens);
  const std::string sixty(59, 'x');  // with its one-byte key: 60
  ASSERT_TRUE(store.Set(As("j", 1), "a", sixty).ok());
  const absl::Status over = store.Set(As("j", 1), "b", sixty);
  EXPECT_EQ(over.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(over.message().find("limit of 100"), std::string::npos) << over;
  EXPECT_TRUE(store.Set(As("j", 1), "a", std::string(99, 'y')).ok());  // replaces its 60
  ASSERT_TRUE(store.Set(As("j", 1), "a", sixty).ok());
  ASSERT_TRUE(store.Set(As("j", 2), "epoch1/a", std::string(52, 'z')).ok());  // 60 in all
  const absl::Status total = store.Set(As("j", 2), "b", std::string(39, 'w'));
  EXPECT_EQ(total.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(total.message().find("limit of 150"), std::string::npos) << total;
  EXPECT_EQ(store.DropEpochsBefore("j", 2, 2), 1u);
  EXPECT_TRUE(store.Set(As("j", 2), "b", std::string(39, 'w')).ok());
  store.CloseScope("j", 1);
  EXPECT_TRUE(store.Set(As("j", 2), "c", std::string(49, 'v')).ok());  // 40 + 50
}

// A pending wait's keys count against the byte limits while it waits, with the values
// held: a rank cannot hold more than the limits through waits on keys nobody sets. A
// write counts values only (the value a wait waits for is never refused for it), and a
// wait on keys already set holds nothing.
TEST(RendezvousStore, APendingWaitsKeysCountAgainstTheByteLimits) {
  RendezvousStore::Limits limits;
  limits.max_bytes_per_scope = 100;
  limits.max_bytes = 150;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  absl::Status first = absl::UnknownError("pending"), second, set_already;
  absl::Status third = absl::UnknownError("pending");
  const uint64_t waiting = store.WaitAsync(As("j", 1), {std::string(30, 'k')},
                                           [&](absl::Status s) { first = std::move(s); });
  EXPECT_EQ(first.code(), absl::StatusCode::kUnknown);  // pending: 60 bytes held
  store.WaitAsync(As("j", 1), {std::string(30, 'l')},
                  [&](absl::Status s) { second = std::move(s); });
  EXPECT_EQ(second.code(), absl::StatusCode::kResourceExhausted) << second;
  EXPECT_NE(second.message().find("holds 60 bytes while it waits"), std::string::npos) << second;
  ASSERT_TRUE(store.Set(As("j", 1), "a", std::string(99, 'x')).ok());  // values alone: 100
  store.WaitAsync(As("j", 1), {"a"}, [&](absl::Status s) { set_already = std::move(s); });
  EXPECT_TRUE(set_already.ok()) << set_already;  // held nothing, done at once
  store.CancelWait(waiting);
  EXPECT_EQ(first.code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(store.Set(As("j", 1), "a", std::string(9, 'x')).ok());  // 10 held
  store.WaitAsync(As("j", 1), {std::string(45, 'm')},
                  [&](absl::Status s) { third = std::move(s); });  // 90 beside 10: fits
  EXPECT_EQ(third.code(), absl::StatusCode::kUnknown) << third;    // pending, not refused
}

// A fault-tolerant attempt's membership epochs each connect through their own keys; the
// coordinator drops those of epochs before the last once a new one is written. The
// first connect's keys (of no epoch) are epoch 0's: kept only while epoch 1 may still
// be connecting beside them (they held a large world's bytes for the whole attempt).
TEST(RendezvousStore, DropsTheKeysOfEarlierMembershipEpochs) {
  RendezvousStore store;
  store.OpenScope("j", 1, kTokens);
  for (const char* key : {"rank0", "shard0/rank1", "epoch1/world/0", "epoch2/world/0",
                          "epoch2/shard/1", "epoch3/world/0", "epoch12", "epochs/0"}) {
    ASSERT_TRUE(store.Set(As("j", 1), key, "v").ok()) << key;
  }
  EXPECT_EQ(store.DropEpochsBefore("j", 1, 0), 0u);
  EXPECT_EQ(store.DropEpochsBefore("j", 1, 3), 7u);
  for (const char* gone : {"rank0", "shard0/rank1", "epoch1/world/0", "epoch2/world/0",
                           "epoch2/shard/1", "epoch12", "epochs/0"}) {
    EXPECT_EQ(store.Get(As("j", 1), gone).status().code(), absl::StatusCode::kNotFound) << gone;
  }
  EXPECT_TRUE(store.Get(As("j", 1), "epoch3/world/0").ok());
  EXPECT_EQ(store.DropEpochsBefore("j", 2, 3), 0u);  // no such scope
}

// Keys are bounded on reads and waits as on writes, and a caller's job id or key comes
// back in a message cut and escaped (common/printable_text.h), never raw: a binary value
// of kilobytes would grow threefold in grpc-message.
TEST(RendezvousStore, BoundsKeysAndEchoesCallersValuesCutAndEscaped) {
  RendezvousStore::Limits limits;
  limits.max_key_bytes = 8;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  EXPECT_EQ(store.Get(As("j", 1), "123456789").status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status waited = absl::UnknownError("pending");
  store.WaitAsync(As("j", 1), {"a", "123456789"}, [&](absl::Status s) { waited = std::move(s); });
  EXPECT_EQ(waited.code(), absl::StatusCode::kInvalidArgument) << waited;

  const std::string binary(4000, '\x01');
  const absl::Status closed = store.Set(As(binary, 1), "k", "v");
  EXPECT_EQ(closed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(closed.message().find("... (4000 bytes)"), std::string::npos) << closed.message();
  EXPECT_LT(closed.message().size(), 2000u) << closed.message().size();
  EXPECT_EQ(closed.message().find('\x01'), std::string::npos) << "echoed raw";
  const absl::Status missing = store.Get(As("j", 1), std::string(8, '\x02')).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message().find('\x02'), std::string::npos) << "echoed raw";
}

// Waits hold no thread: each completes through its callback, exactly once, on the call
// that completed it.
TEST(RendezvousStore, AsyncWaitsCompleteOnceWhenTheirLastKeyIsSet) {
  RendezvousStore store;
  store.OpenScope("j", 1, kTokens);
  std::vector<absl::Status> results(3, absl::UnknownError("pending"));
  int calls = 0;
  auto record = [&](int i) {
    return [&, i](absl::Status status) {
      results[i] = std::move(status);
      ++calls;
    };
  };
  store.WaitAsync(As("j", 1), {"a", "b"}, record(0));
  store.WaitAsync(As("j", 1), {"b", "b"}, record(1));  // a key named twice counts once
  const uint64_t expiring = store.WaitAsync(As("j", 1), {"a", "c"}, record(2));
  ASSERT_TRUE(store.Set(As("j", 1), "a", "1").ok());
  EXPECT_EQ(calls, 0);
  ASSERT_TRUE(store.Set(As("j", 1), "b", "1").ok());
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(results[0].ok());
  EXPECT_TRUE(results[1].ok());
  store.ExpireWait(expiring);
  ASSERT_EQ(calls, 3);
  EXPECT_EQ(results[2].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(results[2].message(), "rendezvous: keys still unset: c");
  // Setting the key later, or expiring again, calls nothing more.
  ASSERT_TRUE(store.Set(As("j", 1), "c", "1").ok());
  store.ExpireWait(expiring);
  store.CancelWait(expiring);
  EXPECT_EQ(calls, 3);
  // Already set: at once.
  absl::Status now = absl::UnknownError("pending");
  store.WaitAsync(As("j", 1), {"a", "c"}, [&](absl::Status s) { now = std::move(s); });
  EXPECT_TRUE(now.ok());
}

TEST(RendezvousStore, AsyncWaitsEndWithTheScopeOrTheCaller) {
  RendezvousStore::Limits limits;
  limits.max_waits_per_scope = 2;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  absl::Status first, second, third, closed_scope;
  const uint64_t cancelled =
      store.WaitAsync(As("j", 1), {"x"}, [&](absl::Status s) { first = std::move(s); });
  store.WaitAsync(As("j", 1), {"x"}, [&](absl::Status s) { second = std::move(s); });
  store.WaitAsync(As("j", 1), {"x"}, [&](absl::Status s) { third = std::move(s); });
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  store.CancelWait(cancelled);
  EXPECT_EQ(first.code(), absl::StatusCode::kCancelled);
  store.CloseScope("j", 1);
  EXPECT_EQ(second.code(), absl::StatusCode::kAborted);
  store.WaitAsync(As("j", 1), {"x"}, [&](absl::Status s) { closed_scope = std::move(s); });
  EXPECT_EQ(closed_scope.code(), absl::StatusCode::kFailedPrecondition);
}

// Only the attempt's ranks may read or write its keys: a caller without one of its
// tokens (another attempt's rank, anyone) is refused, whatever it asks.
TEST(RendezvousStore, OnlyTheAttemptsRanksMayUseItsScope) {
  RendezvousStore store;
  store.OpenScope("job-1", 1, {"a0", "a1"});
  store.OpenScope("job-2", 1, {"b0"});
  ASSERT_TRUE(store.Set(As("job-1", 1, "a1"), "gloo/rank1", "10.0.0.2:4000").ok());
  for (const char* token : {"", "b0", "a0a1", "A0"}) {
    const v1::RendezvousScope intruder = As("job-1", 1, token);
    EXPECT_EQ(store.Get(intruder, "gloo/rank1").status().code(),
              absl::StatusCode::kPermissionDenied)
        << token;
    EXPECT_EQ(store.Set(intruder, "gloo/rank1", "evil").code(),
              absl::StatusCode::kPermissionDenied);
    EXPECT_EQ(store.Add(intruder, "n", 1).status().code(), absl::StatusCode::kPermissionDenied);
    absl::Status waited;
    store.WaitAsync(intruder, {"gloo/rank1"}, [&](const absl::Status& s) { waited = s; });
    EXPECT_EQ(waited.code(), absl::StatusCode::kPermissionDenied);
  }
  const absl::Status refused = store.Set(As("job-1", 1, "b0"), "k", "v");
  EXPECT_NE(refused.message().find("holds no rank of attempt 1 of job 'job-1'"), std::string::npos)
      << refused;
  EXPECT_EQ(*store.Get(As("job-1", 1, "a0"), "gloo/rank1"), "10.0.0.2:4000");
}

TEST(RendezvousStore, EachRankHasABoundedNumberOfWaits) {
  RendezvousStore::Limits limits;
  limits.max_waits_per_rank = 2;
  RendezvousStore store(limits);
  store.OpenScope("j", 1, kTokens);
  std::vector<absl::Status> statuses(4);
  for (int i = 0; i < 3; ++i) {
    store.WaitAsync(As("j", 1, "t0"), {"x"},
                    [&statuses, i](const absl::Status& s) { statuses[i] = s; });
  }
  EXPECT_EQ(statuses[2].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(statuses[2].message().find("rank 0 already has 2 waits pending"), std::string::npos)
      << statuses[2];
  // Another rank still may wait; and rank 0 again once its waits are done.
  store.WaitAsync(As("j", 1, "t1"), {"x"}, [&](absl::Status s) { statuses[3] = std::move(s); });
  ASSERT_TRUE(store.Set(As("j", 1, "t2"), "x", "1").ok());
  for (int i : {0, 1, 3}) EXPECT_TRUE(statuses[i].ok()) << i << ": " << statuses[i];
  absl::Status again = absl::UnknownError("pending");
  store.WaitAsync(As("j", 1, "t0"), {"y"}, [&](absl::Status s) { again = std::move(s); });
  EXPECT_EQ(again.code(), absl::StatusCode::kUnknown);  // pending, not refused
}

}  // namespace
}  // namespace shardwise
