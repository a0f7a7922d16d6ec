#ifndef SHARDWISE_CONTRACTS_SAFETENSORS_HEADER_H_
#define SHARDWISE_CONTRACTS_SAFETENSORS_HEADER_H_

// A safetensors header's JSON, checked as the format's reference implementation (Hugging
// Face's safetensors crate) checks it, and read as a stream: a header comes from a file
// someone else chose, and the coordinator reads the headers of a job's checkpoint at
// submission, so the parse keeps only the entries (never a tree of the whole header) and
// stops at the first thing out of place.
//
// Refused, naming the tensor and the value as given: a value of the wrong type (a shape
// ["32"], a dtype 7, an offset 1.5 or -1), a nesting deeper than the format's, more than
// kMaxSafetensorsEntries entries, an entry lacking dtype, shape or data_offsets, a
// "__metadata__" that does not map strings to strings, offsets that do not fit the shape,
// and offsets that do not tile the data exactly: overlapping, leaving a gap, or leaving
// bytes after the last tensor.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardwise {

// The most entries a header may hold. A model file holds hundreds to a few thousand;
// DeepSeek V3's 671B parameters are about 91,000 tensors over all its files.
inline constexpr size_t kMaxSafetensorsEntries = size_t{1} << 18;

struct SafetensorsHeaderEntry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets in the data, which follows the header
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsHeaderEntry> tensors;
  std::map<std::string, std::string> metadata;
};

// The entries of `json`, a header followed by `data_size` bytes of data; `element_size`
// gives a dtype's bytes per element (0 for a dtype the reader does not take).
// INVALID_ARGUMENT saying what is wrong, as above.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(absl::string_view json, uint64_t data_size,
                                                         int (*element_size)(const std::string&));

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_SAFETENSORS_HEADER_H_
