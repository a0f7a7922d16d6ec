#ifndef SHARDWISE_WORKER_COMM_MULTI_GET_STORE_H_
#define SHARDWISE_WORKER_COMM_MULTI_GET_STORE_H_

// A rendezvous store that reads many keys, or parts of them, in one call. Gloo's Store
// reads one whole value a call, and Gloo's full-mesh connect reads every peer's whole
// key (all its pairs' addresses) for the one address meant for it (full_mesh.h). The
// project's stores derive from this and pass it on; MultiGet reads any store, Gloo's own
// key by key.

#include <cstddef>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"

namespace shardwise {

// `length` bytes of a key's value from `offset`; a length of 0: to the value's end.
struct StoreRead {
  std::string key;
  size_t offset = 0;
  size_t length = 0;
};

class MultiGetStore : public gloo::rendezvous::Store {
 public:
  // What each read names, in the reads' order. The keys must be set (wait() for them
  // first): one that is not throws, as does a read past its value's end.
  virtual std::vector<std::vector<char>> multiGet(const std::vector<StoreRead>& reads) = 0;
};

// `store.multiGet(reads)` where `store` is a MultiGetStore, its get() key by key elsewhere.
std::vector<std::vector<char>> MultiGet(gloo::rendezvous::Store& store,
                                        const std::vector<StoreRead>& reads);

// The part of `value` that `read` names; gloo::IoException past its end.
std::vector<char> ReadPart(const std::vector<char>& value, const StoreRead& read);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_MULTI_GET_STORE_H_
