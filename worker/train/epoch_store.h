#ifndef SHARDWISE_WORKER_TRAIN_EPOCH_STORE_H_
#define SHARDWISE_WORKER_TRAIN_EPOCH_STORE_H_

// The rendezvous of one membership epoch of a fault-tolerant attempt: the attempt's store
// under the prefix "epochN" (an earlier epoch's group of the same name left its peers'
// addresses behind), and a wait that gives up once a newer epoch has come. After a loss,
// each rank moves to the newest epoch it holds when its collective fails, and a heal's
// epoch can arrive between two ranks' failures: one connects the loss's epoch, another
// the heal's, and each would wait out the rendezvous timeout for the other. Giving up
// on a superseded epoch sends them all to the newest.
//
// Thread-safety: as the store it wraps; used by the rank's training thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"
#include "worker/comm/prefixed_store.h"

namespace shardwise {

class EpochStore final : public MultiGetStore {
 public:
  // `superseded` says whether a newer epoch than `epoch` has come; `timeout` bounds a
  // wait without one.
  EpochStore(int32_t epoch, gloo::rendezvous::Store& attempt_store,
             std::function<bool()> superseded, std::chrono::milliseconds timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  // In slices: gloo::IoException once the epoch is superseded, or after `timeout`.
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) override;

 private:
  const int32_t epoch_;
  PrefixedStore prefixed_;
  const std::function<bool()> superseded_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_TRAIN_EPOCH_STORE_H_
