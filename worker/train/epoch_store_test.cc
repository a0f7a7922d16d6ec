// The epoch's rendezvous over an in-memory store: keys kept apart per epoch, a wait that
// spans slices, and one that gives up once a newer epoch comes.

#include "worker/train/epoch_store.h"

#include <atomic>
#include <string>
#include <thread>

#include "gloo/common/error.h"
#include "gloo/rendezvous/hash_store.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

constexpr std::chrono::milliseconds kLong(20000);

std::string WaitError(EpochStore& store, const std::string& key,
                      std::chrono::milliseconds timeout) {
  try {
    store.wait({key}, timeout);
  } catch (const gloo::IoException& e) {
    return e.what();
  }
  return "";
}

TEST(EpochStore, EachEpochHasItsOwnKeys) {
  gloo::rendezvous::HashStore attempt;
  EpochStore two(
      2, attempt, [] { return false; }, kLong);
  EpochStore three(
      3, attempt, [] { return false; }, kLong);
  two.set("rank0", {'a'});
  EXPECT_EQ(two.get("rank0"), std::vector<char>{'a'});
  EXPECT_NE(WaitError(three, "rank0", std::chrono::milliseconds(300)).find("did not arrive"),
            std::string::npos);
}

TEST(EpochStore, AWaitLastsAcrossSlicesUntilThePeerArrives) {
  gloo::rendezvous::HashStore attempt;
  EpochStore mine(
      2, attempt, [] { return false; }, kLong);
  EpochStore peers(
      2, attempt, [] { return false; }, kLong);
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past a few slices
    peers.set("rank1", {'b'});
  });
  EXPECT_EQ(WaitError(mine, "rank1", kLong), "");
  peer.join();
}

// A rank that connects epoch 1 while the others connect epoch 2 (which came just after
// its failure) gives up on epoch 1 once epoch 2 is there, instead of waiting out the
// timeout for peers that will never come.
TEST(EpochStore, AWaitGivesUpOnceANewerEpochCame) {
  gloo::rendezvous::HashStore attempt;
  std::atomic<bool> newer{false};
  EpochStore mine(
      1, attempt, [&] { return newer.load(); }, kLong);
  std::thread delivery([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    newer = true;
  });
  EXPECT_NE(WaitError(mine, "rank1", kLong).find("membership epoch 1: a newer epoch came"),
            std::string::npos);
  delivery.join();
}

// An attempt store whose waits end a millisecond early, as the coordinator-backed store's
// can (it rounds what is left of a wait down to milliseconds), or fail at once.
class EarlyStore final : public gloo::rendezvous::Store {
 public:
  explicit EarlyStore(bool broken) : broken_(broken) {}
  void set(const std::string&, const std::vector<char>&) override {}
  std::vector<char> get(const std::string&) override { return {}; }
  void wait(const std::vector<std::string>& keys) override { wait(keys, kLong); }
  void wait(const std::vector<std::string>&, const std::chrono::milliseconds& timeout) override {
    if (broken_) throw gloo::IoException("rendezvous wait: permission denied");
    std::this_thread::sleep_for(timeout - std::chrono::milliseconds(1));
    if (++waits_ < 4) throw gloo::IoException("rendezvous: peers did not arrive");
  }
  int waits() const { return waits_; }

 private:
  const bool broken_;
  int waits_ = 0;
};

TEST(EpochStore, ASliceThatEndsAMillisecondEarlyIsNoFailure) {
  EarlyStore attempt(/*broken=*/false);
  EpochStore mine(
      2, attempt, [] { return false; }, kLong);
  EXPECT_EQ(WaitError(mine, "rank1", kLong), "");
  EXPECT_EQ(attempt.waits(), 4);  // three slices ran out, the fourth found the key
}

TEST(EpochStore, AnErrorOfTheAttemptStoreEndsTheWaitAtOnce) {
  EarlyStore attempt(/*broken=*/true);
  EpochStore mine(
      2, attempt, [] { return false; }, kLong);
  EXPECT_EQ(WaitError(mine, "rank1", kLong), "rendezvous wait: permission denied");
}

}  // namespace
}  // namespace shardwise
