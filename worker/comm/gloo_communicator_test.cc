// Each rank is a thread of this process, connected over real Gloo/TCP on loopback through
// an in-memory store, for several world sizes and element counts.

#include "worker/comm/gloo_communicator.h"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/compute/casts.h"

namespace shardwise {
namespace {

void RunRanks(int world, const std::function<void(int rank, gloo::rendezvous::Store&)>& body) {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  threads.reserve(world);
  for (int r = 0; r < world; ++r) threads.emplace_back([&, r] { body(r, store); });
  for (auto& t : threads) t.join();
}

std::vector<int> Iota(int n, int start = 0, int stride = 1) {
  std::vector<int> v;
  v.reserve(n);
  for (int i = 0; i < n; ++i) v.push_back(start + i * stride);
  return v;
}

class CollectivesTest : public ::testing::TestWithParam<std::tuple<int, size_t>> {};

TEST_P(CollectivesTest, MatchTheirDefinitions) {
  const auto [world, numel] = GetParam();
  RunRanks(world, [&, world = world, numel = numel](int rank, gloo::rendezvous::Store& store) {
    auto comm = GlooCommunicator::ConnectGroup(store, "world", Iota(world), rank, {});
    ASSERT_TRUE(comm.ok()) << comm.status();
    GlooCommunicator& c = **comm;
    // Rank r's element i is r * 1000 + i: every result below is known exactly.
    auto value = [](int r, size_t i) { return static_cast<float>(size_t{1000} * r + i); };

    std::vector<float> shard(numel), gathered(numel * world);
    for (size_t i = 0; i < numel; ++i) shard[i] = value(rank, i);
    ASSERT_TRUE(c.AllGather(shard.data(), numel, gathered.data()).ok());
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < numel; ++i) ASSERT_EQ(gathered[r * numel + i], value(r, i));
    }

    std::vector<float> full(numel * world), mine(numel);
    for (size_t i = 0; i < full.size(); ++i) full[i] = value(rank, i);
    ASSERT_TRUE(c.ReduceScatter(full.data(), numel, mine.data()).ok());  // clobbers `full`
    for (size_t i = 0; i < numel; ++i) {
      float expected = 0;
      for (int r = 0; r < world; ++r) expected += value(r, rank * numel + i);
      ASSERT_EQ(mine[i], expected) << "element " << i;
    }

    std::vector<float> summed(shard);
    ASSERT_TRUE(c.AllReduce(summed.data(), numel).ok());
    for (size_t i = 0; i < numel; ++i) {
      float expected = 0;
      for (int r = 0; r < world; ++r) expected += value(r, i);
      ASSERT_EQ(summed[i], expected);
    }

    std::vector<float> broadcast(shard);
    ASSERT_TRUE(c.Broadcast(broadcast.data(), numel, world - 1).ok());
    for (size_t i = 0; i < numel; ++i) ASSERT_EQ(broadcast[i], value(world - 1, i));
    ASSERT_TRUE(c.Barrier().ok());
    EXPECT_EQ(c.stats().reduce_scatter_bytes, static_cast<int64_t>(numel * world * 4));
  });
}

INSTANTIATE_TEST_SUITE_P(WorldsAndSizes, CollectivesTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(size_t{1}, size_t{7}, size_t{4099})));

class TypedCollectivesTest : public ::testing::TestWithParam<std::tuple<int, ScalarType>> {};

// Values chosen so that every sum is exact in the type: the results are known bit for bit.
TEST_P(TypedCollectivesTest, SixteenBitFloatsInt64AndFloat64) {
  const auto [world, type] = GetParam();
  const size_t numel = 33;
  RunRanks(world, [&, world = world, type = type](int rank, gloo::rendezvous::Store& store) {
    auto comm = GlooCommunicator::ConnectGroup(store, "world", Iota(world), rank, {});
    ASSERT_TRUE(comm.ok()) << comm.status();
    GlooCommunicator& c = **comm;
    auto value = [](int r, size_t i) { return static_cast<double>(r + 1) * 0.5 + i % 7; };
    auto encode = [type = type](double v, void* slot) {
      if (type == ScalarType::kFloat16)
        *static_cast<uint16_t*>(slot) = cpu::FloatToHalf(static_cast<float>(v));
      if (type == ScalarType::kBFloat16)
        *static_cast<uint16_t*>(slot) = cpu::FloatToBFloat16(static_cast<float>(v));
      if (type == ScalarType::kInt64) *static_cast<int64_t*>(slot) = static_cast<int64_t>(v * 2);
      if (type == ScalarType::kFloat64) *static_cast<double*>(slot) = v;
    };
    auto decode = [type = type](const void* slot) -> double {
      if (type == ScalarType::kFloat16)
        return cpu::HalfToFloat(*static_cast<const uint16_t*>(slot));
      if (type == ScalarType::kBFloat16)
        return cpu::BFloat16ToFloat(*static_cast<const uint16_t*>(slot));
      if (type == ScalarType::kFloat64) return *static_cast<const double*>(slot);
      return *static_cast<const int64_t*>(slot) / 2.0;
    };
    const size_t size = ElementSize(type);
    std::vector<char> full(numel * world * size), mine(numel * size),
        gathered(numel * world * size);
    for (size_t i = 0; i < numel * world; ++i) encode(value(rank, i), full.data() + i * size);
    ASSERT_TRUE(c.ReduceScatter(full.data(), numel, mine.data(), type).ok());
    for (size_t i = 0; i < numel; ++i) {
      double expected = 0;
      for (int r = 0; r < world; ++r) expected += value(r, rank * numel + i);
      ASSERT_EQ(decode(mine.data() + i * size), expected) << ScalarTypeName(type) << " " << i;
    }
    ASSERT_TRUE(c.AllGather(mine.data(), numel, gathered.data(), type).ok());
    ASSERT_TRUE(c.AllReduce(mine.data(), numel, type).ok());
    for (size_t i = 0; i < numel; ++i) {
      double expected = 0;
      for (int r = 0; r < world; ++r) expected += decode(gathered.data() + (r * numel + i) * size);
      ASSERT_EQ(decode(mine.data() + i * size), expected) << ScalarTypeName(type) << " " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Types, TypedCollectivesTest,
    ::testing::Combine(::testing::Values(2, 3, 4),
                       ::testing::Values(ScalarType::kFloat16, ScalarType::kBFloat16,
                                         ScalarType::kInt64, ScalarType::kFloat64)));

TEST(GlooCommunicator, SubGroupsOfAHybridLayout) {
  // 4 ranks as 2 shard groups of 2 ({0,1}, {2,3}) and 2 replicate groups ({0,2}, {1,3}).
  RunRanks(4, [](int rank, gloo::rendezvous::Store& store) {
    const int group = rank / 2, local = rank % 2;
    auto shard_group = GlooCommunicator::ConnectGroup(store, "shard" + std::to_string(group),
                                                      Iota(2, group * 2), rank, {});
    auto replicate_group = GlooCommunicator::ConnectGroup(
        store, "replicate" + std::to_string(local), Iota(2, local, 2), rank, {});
    ASSERT_TRUE(shard_group.ok() && replicate_group.ok());
    EXPECT_EQ((*shard_group)->rank(), local);
    EXPECT_EQ((*replicate_group)->rank(), group);
    float value = static_cast<float>(rank);
    ASSERT_TRUE((*shard_group)->AllReduce(&value, 1).ok());
    EXPECT_EQ(value, group == 0 ? 1.0f : 5.0f);
    value = static_cast<float>(rank);
    ASSERT_TRUE((*replicate_group)->AllReduce(&value, 1).ok());
    EXPECT_EQ(value, local == 0 ? 2.0f : 4.0f);
  });
}

// Rank 0 sends three messages to rank 2, which gets them in order, while ranks 1 and 3 take
// no part; then a reduce-scatter of all four (which draws on the context's slot sequence)
// still pairs up.
TEST(GlooCommunicator, PointToPointLeavesTheOtherRanksOut) {
  RunRanks(4, [](int rank, gloo::rendezvous::Store& store) {
    DataPlaneOptions options;
    options.timeout = std::chrono::milliseconds(5000);
    auto comm = GlooCommunicator::ConnectGroup(store, "world", Iota(4), rank, options);
    ASSERT_TRUE(comm.ok()) << comm.status();
    GlooCommunicator& c = **comm;
    std::vector<int64_t> first(1000), second(3), third(5);
    auto bytes = [](std::vector<int64_t>& v) {
      return absl::Span<char>(reinterpret_cast<char*>(v.data()), v.size() * sizeof(int64_t));
    };
    if (rank == 0) {
      for (size_t i = 0; i < first.size(); ++i) first[i] = static_cast<int64_t>(i) * 7;
      second = {1, 2, 3};
      third = {9, 8, 7, 6, 5};
      // Two posted at once (and an empty one, skipped), then one alone.
      ASSERT_TRUE(c.SendBuffers({bytes(first), absl::Span<const char>(), bytes(second)}, 2).ok());
      ASSERT_TRUE(c.Send(third.data(), third.size() * sizeof(int64_t), 2).ok());
    } else if (rank == 2) {
      ASSERT_TRUE(c.RecvBuffers({bytes(first), absl::Span<char>(), bytes(second)}, 0).ok());
      ASSERT_TRUE(c.Recv(third.data(), third.size() * sizeof(int64_t), 0).ok());
      for (size_t i = 0; i < first.size(); ++i) ASSERT_EQ(first[i], static_cast<int64_t>(i) * 7);
      EXPECT_EQ(second, (std::vector<int64_t>{1, 2, 3}));
      EXPECT_EQ(third, (std::vector<int64_t>{9, 8, 7, 6, 5}));
    }
    std::vector<float> full(4, static_cast<float>(rank)), mine(1);
    ASSERT_TRUE(c.ReduceScatter(full.data(), 1, mine.data()).ok());
    EXPECT_EQ(mine[0], 6.0f);
  });
}

// A store that says which waits came with a bound of the caller's.
class WaitRecordingStore final : public gloo::rendezvous::Store {
 public:
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override {
    store_.wait(keys, std::chrono::seconds(20));  // this store's own bound
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      bounds_.push_back(timeout);
    }
    store_.wait(keys, timeout);
  }
  std::vector<std::chrono::milliseconds> bounds() {
    std::lock_guard<std::mutex> lock(mu_);
    return bounds_;
  }

 private:
  gloo::rendezvous::HashStore store_;
  std::mutex mu_;
  std::vector<std::chrono::milliseconds> bounds_;
};

// With a connect timeout (a membership epoch's connect), a group's waits for its peers'
// addresses keep the store's own bound (the epoch store's: the peer timeout, a joiner's
// wait): Gloo's PrefixStore gave every one its 30 s default.
TEST(GlooCommunicator, AGroupsConnectKeepsTheStoresOwnBound) {
  WaitRecordingStore store;
  std::vector<std::thread> threads;
  threads.reserve(2);
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&store, rank] {
      DataPlaneOptions options;
      options.connect_timeout = std::chrono::milliseconds(2000);
      auto comm = GlooCommunicator::ConnectGroup(store, "shard0", {4, 5}, 4 + rank, options);
      ASSERT_TRUE(comm.ok()) << comm.status();
      // One collective before the communicator goes: a rank whose own connect ended first
      // would otherwise close its pair while the other's handshake still reads from it.
      float one = 1.0f;
      ASSERT_TRUE((*comm)->AllReduce(&one, 1).ok());
      EXPECT_EQ(one, 2.0f);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_TRUE(store.bounds().empty()) << store.bounds().front().count() << " ms";
}

TEST(GlooCommunicator, RefusesARankOutsideItsGroup) {
  gloo::rendezvous::HashStore store;
  auto comm = GlooCommunicator::ConnectGroup(store, "g", {1, 2}, 0, {});
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardwise
