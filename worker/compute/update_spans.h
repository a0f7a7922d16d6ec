#ifndef SHARDWISE_WORKER_COMPUTE_UPDATE_SPANS_H_
#define SHARDWISE_WORKER_COMPUTE_UPDATE_SPANS_H_

// The spans of one flat shard that one optimizer call steps (fsdp/optimizer_ranges.h cuts a
// unit's shard where weight decay changes: a GPT block has nine), and their packing into
// tables a GPU kernel takes by value, so that one launch steps a whole shard instead of one
// per span (the multi-tensor optimizers of PyTorch do the same for lists of tensors).
// Within a table the spans' elements are numbered one after another; SpanOf finds an
// element's span, so a grid-stride loop covers every element of every span once.

#include <cstdint>
#include <vector>

#include "worker/compute/host_device.h"

namespace shardwise {

// Elements [begin, end) of a shard, with or without weight decay.
struct UpdateSpan {
  int64_t begin = 0, end = 0;
  bool decay = true;
};

inline constexpr int kMaxSpansPerTable = 32;

struct SpanTable {
  int count = 0;
  int64_t begin[kMaxSpansPerTable] = {};
  // first[s]: the number of elements of the spans before s; first[count]: the total.
  int64_t first[kMaxSpansPerTable + 1] = {};
  bool decay[kMaxSpansPerTable] = {};
  SHARDWISE_HOST_DEVICE int64_t total() const { return first[count]; }
};

// The span holding the table's k-th element (0 <= k < total()): the last s with
// first[s] <= k (empty spans skipped).
SHARDWISE_HOST_DEVICE inline int SpanOf(const SpanTable& table, int64_t k) {
  int low = 0, high = table.count - 1;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (table.first[mid] <= k) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

// The shard's index of the table's k-th element.
SHARDWISE_HOST_DEVICE inline int64_t ElementOf(const SpanTable& table, int64_t k) {
  const int s = SpanOf(table, k);
  return table.begin[s] + (k - table.first[s]);
}

// `spans` in tables of at most kMaxSpansPerTable, in order (empty spans left out).
inline std::vector<SpanTable> SpanTables(const std::vector<UpdateSpan>& spans) {
  std::vector<SpanTable> tables;
  for (const UpdateSpan& span : spans) {
    if (span.end <= span.begin) continue;
    if (tables.empty() || tables.back().count == kMaxSpansPerTable) tables.emplace_back();
    SpanTable& table = tables.back();
    const int s = table.count++;
    table.begin[s] = span.begin;
    table.decay[s] = span.decay;
    table.first[s + 1] = table.first[s] + (span.end - span.begin);
  }
  return tables;
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_UPDATE_SPANS_H_
