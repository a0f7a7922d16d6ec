#ifndef SHARDWISE_WORKER_COMM_PREFIXED_STORE_H_
#define SHARDWISE_WORKER_COMM_PREFIXED_STORE_H_

// A store's keys under "prefix/", as Gloo's PrefixStore names them (a Gloo group's keys, a
// membership epoch's), with two differences: a wait without a timeout keeps the inner
// store's own bound (Gloo's PrefixStore waits its 30 s default, which cut a group's
// connect in a membership epoch short of the epoch store's bound), and reads of many keys
// stay one call (MultiGetStore).
//
// Thread-safety: as the store it wraps.

#include <chrono>
#include <string>
#include <vector>

#include "worker/comm/multi_get_store.h"

namespace shardwise {

class PrefixedStore final : public MultiGetStore {
 public:
  // `store` must outlive this.
  PrefixedStore(const std::string& prefix, gloo::rendezvous::Store& store)
      : prefix_(prefix + "/"), store_(store) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;
  std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) override;

 private:
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;

  const std::string prefix_;
  gloo::rendezvous::Store& store_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_PREFIXED_STORE_H_
