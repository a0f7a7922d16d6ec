#ifndef SHARDWISE_CONTRACTS_ELEMENT_RANGE_H_
#define SHARDWISE_CONTRACTS_ELEMENT_RANGE_H_

// Elements [begin, end) of a flat run of values (empty where begin >= end): where a
// parameter lies in its unit's flat buffer, where a shard lies, what of a tensor a reader
// is asked for, and what of one lies in another.

#include <algorithm>
#include <cstdint>

namespace shardwise {

struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;

  bool empty() const { return begin >= end; }
  int64_t size() const { return empty() ? 0 : end - begin; }
};

// The elements both hold.
inline ElementRange Intersect(ElementRange a, ElementRange b) {
  return {std::max(a.begin, b.begin), std::min(a.end, b.end)};
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_ELEMENT_RANGE_H_
