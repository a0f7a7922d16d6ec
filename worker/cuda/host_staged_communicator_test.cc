// Two ranks on one GPU, each a thread with its own stream, collectives through pinned
// host memory and real Gloo over loopback: the results equal the collectives'
// definitions, in FP32 and BF16.

#include "worker/cuda/host_staged_communicator.h"

#include <thread>
#include <vector>

#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/cuda/gpu_test_support.h"
#include "worker/cuda/stream.h"

namespace shardwise::cuda {
namespace {

using ::shardwise::cuda::testing::DeviceVector;

TEST(HostStagedCommunicatorTest, TwoRanksOnOneGpu) {
  SKIP_WITHOUT_GPU();
  constexpr int kWorld = 2;
  constexpr size_t kShard = 5003;
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      auto host = GlooCommunicator::ConnectGroup(store, "staged", {0, 1}, rank, {});
      ASSERT_TRUE(host.ok()) << host.status();
      auto stream = Stream::Create();
      ASSERT_TRUE(stream.ok());
      HostStagedCommunicator c(host->get(), stream->get());
      auto value = [](int r, size_t i) { return static_cast<float>(r * 100000 + i); };

      std::vector<float> shard(kShard);
      for (size_t i = 0; i < kShard; ++i) shard[i] = value(rank, i);
      DeviceVector<float> dshard(shard), gathered(kShard * kWorld);
      ASSERT_TRUE(c.AllGather(dshard.get(), kShard, gathered.get()).ok());
      std::vector<float> got = gathered.ToHost();
      for (int r = 0; r < kWorld; ++r) {
        for (size_t i = 0; i < kShard; ++i) ASSERT_EQ(got[r * kShard + i], value(r, i));
      }

      std::vector<float> full(kShard * kWorld);
      for (size_t i = 0; i < full.size(); ++i) full[i] = value(rank, i);
      DeviceVector<float> dfull(full), mine(kShard);
      ASSERT_TRUE(c.ReduceScatter(dfull.get(), kShard, mine.get()).ok());
      std::vector<float> reduced = mine.ToHost();
      for (size_t i = 0; i < kShard; ++i) {
        ASSERT_EQ(reduced[i], value(0, rank * kShard + i) + value(1, rank * kShard + i));
      }

      ASSERT_TRUE(c.AllReduce(dshard.get(), kShard).ok());
      std::vector<float> summed = dshard.ToHost();
      for (size_t i = 0; i < kShard; ++i) ASSERT_EQ(summed[i], value(0, i) + value(1, i));

      // BF16: 1.0 (0x3f80) + 1.0 = 2.0 (0x4000).
      DeviceVector<uint16_t> ones(std::vector<uint16_t>(kShard, 0x3f80));
      ASSERT_TRUE(c.AllReduce(ones.get(), kShard, ScalarType::kBFloat16).ok());
      for (uint16_t bits : ones.ToHost()) ASSERT_EQ(bits, 0x4000);

      DeviceVector<float> root(std::vector<float>(7, static_cast<float>(rank + 1)));
      ASSERT_TRUE(c.Broadcast(root.get(), 7, 1).ok());
      for (float v : root.ToHost()) ASSERT_EQ(v, 2.0f);
      // Counted once, by the host communicator.
      EXPECT_EQ((*host)->stats().all_gather_bytes, static_cast<int64_t>(kShard * kWorld * 4));
      EXPECT_EQ(c.stats().all_gather_bytes, 0);
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace shardwise::cuda
