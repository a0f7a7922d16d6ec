#include "worker/comm/prefixed_store.h"

namespace shardwise {

void PrefixedStore::set(const std::string& key, const std::vector<char>& data) {
  store_.set(prefix_ + key, data);
}

std::vector<char> PrefixedStore::get(const std::string& key) { return store_.get(prefix_ + key); }

void PrefixedStore::wait(const std::vector<std::string>& keys) { store_.wait(Prefixed(keys)); }

void PrefixedStore::wait(const std::vector<std::string>& keys,
                         const std::chrono::milliseconds& timeout) {
  store_.wait(Prefixed(keys), timeout);
}

std::vector<std::vector<char>> PrefixedStore::multiGet(const std::vector<StoreRead>& reads) {
  std::vector<StoreRead> prefixed = reads;
  for (StoreRead& read : prefixed) read.key = prefix_ + read.key;
  return MultiGet(store_, prefixed);
}

std::vector<std::string> PrefixedStore::Prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
  return prefixed;
}

}  // namespace shardwise
