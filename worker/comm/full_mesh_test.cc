// The full mesh's address reads, and real connects over Gloo/TCP on loopback (ranks as
// threads) through a store that counts what each rank reads.

#include "worker/comm/full_mesh.h"

#include <sys/socket.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gloo/allreduce.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/address.h"
#include "gloo/transport/tcp/device.h"
#include "gtest/gtest.h"
#include "worker/comm/multi_get_store.h"

namespace shardwise {
namespace {

using TcpAddress = gloo::transport::tcp::Address;

// The bytes of one Gloo TCP pair's address.
size_t TcpAddressBytes() { return TcpAddress(sockaddr_storage{}, 0).bytes().size(); }

TEST(PairIndex, SkipsTheOwner) {
  EXPECT_EQ(PairIndex(3, 0), 0);
  EXPECT_EQ(PairIndex(3, 2), 2);
  EXPECT_EQ(PairIndex(3, 4), 3);
  EXPECT_EQ(PairIndex(0, 1), 0);
}

TEST(PeerAddressRead, IsThePeersSliceOfTheOwnersKey) {
  const StoreRead read = PeerAddressRead(/*owner=*/3, /*peer=*/4, /*address_bytes=*/136);
  EXPECT_EQ(read.key, MeshAddressKey(3));
  EXPECT_EQ(read.offset, 3 * 136);
  EXPECT_EQ(read.length, 136);
}

TEST(MultiGet, ReadsPartsOfAStoreWithoutBatchesKeyByKey) {
  gloo::rendezvous::HashStore store;
  store.set("a", {'0', '1', '2', '3'});
  store.set("b", {'x', 'y'});
  StoreRead middle{"a", 1, 2};
  StoreRead rest{"b", 1, 0};
  EXPECT_EQ(MultiGet(store, {middle, rest}), (std::vector<std::vector<char>>{{'1', '2'}, {'y'}}));
  StoreRead past{"b", 1, 2};
  EXPECT_THROW(MultiGet(store, {past}), gloo::IoException);
}

// Counts what is read through it, and by which call.
class CountingStore final : public MultiGetStore {
 public:
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    ++gets;
    auto value = inner_.get(key);
    bytes_read += value.size();
    return value;
  }
  void wait(const std::vector<std::string>& keys) override { inner_.wait(keys); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    inner_.wait(keys, timeout);
  }
  std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) override {
    ++multi_gets;
    std::vector<std::vector<char>> values = MultiGet(inner_, reads);
    for (const auto& value : values) bytes_read += value.size();
    return values;
  }

  std::atomic<int> gets{0};
  std::atomic<int> multi_gets{0};
  std::atomic<size_t> bytes_read{0};

 private:
  gloo::rendezvous::HashStore inner_;
};

// Connects `world` ranks through `store` and checks an all-reduce over each context.
void ConnectWorld(int world, CountingStore& store) {
  std::vector<std::thread> ranks;
  ranks.reserve(world);
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&store, rank, world] {
      gloo::transport::tcp::attr attr;
      attr.hostname = "127.0.0.1";
      auto context = ConnectFullMesh(store, gloo::transport::tcp::CreateDevice(attr), rank, world,
                                     FullMeshOptions());
      ASSERT_TRUE(context.ok()) << context.status();
      // Every rank listens on loopback: its local rank is its rank, as Gloo's would be.
      if (world > 1) EXPECT_EQ((*context)->getPair(rank == 0 ? 1 : 0)->getLocalRank(), rank);
      int64_t value = rank;
      gloo::AllreduceOptions allreduce(*context);
      allreduce.setOutput(&value, 1);
      allreduce.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<int64_t>));
      gloo::allreduce(allreduce);
      EXPECT_EQ(value, int64_t{world} * (world - 1) / 2) << "rank " << rank;
    });
  }
  for (auto& rank : ranks) rank.join();
}

TEST(ConnectFullMesh, EachRankPublishesOneAddressAndReadsOneFromEachPeerInOneCall) {
  constexpr int kWorld = 6;
  CountingStore store;
  ConnectWorld(kWorld, store);
  const size_t address_bytes = TcpAddressBytes();
  // Gloo's own connect read kWorld * (kWorld - 1)^2 addresses, with a get for each peer.
  EXPECT_EQ(store.gets.load(), 0);
  EXPECT_EQ(store.multi_gets.load(), kWorld);
  EXPECT_EQ(store.bytes_read.load(), size_t{kWorld} * (kWorld - 1) * address_bytes);
  for (int rank = 0; rank < kWorld; ++rank) {
    EXPECT_EQ(store.get(MeshAddressKey(rank)).size(), (kWorld - 1) * address_bytes)
        << "rank " << rank;
  }
}

TEST(ConnectFullMesh, AWorldOfOneConnectsWithoutTheStore) {
  CountingStore store;
  ConnectWorld(1, store);
  EXPECT_EQ(store.multi_gets.load(), 0);
}

}  // namespace
}  // namespace shardwise
