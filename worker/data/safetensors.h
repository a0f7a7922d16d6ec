#ifndef SHARDWISE_WORKER_DATA_SAFETENSORS_H_
#define SHARDWISE_WORKER_DATA_SAFETENSORS_H_

// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// padded with spaces to a multiple of 8), then the tensors' bytes, little-endian,
// row-major. Shardwise reads F32 and I64 tensors and writes F32 ones.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace shardwise {

struct HostTensor {
  std::string dtype;  // "F32" or "I64"
  std::vector<int64_t> shape;
  std::string bytes;
  int64_t numel() const;
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  const int64_t* i64() const { return reinterpret_cast<const int64_t*>(bytes.data()); }
};

using TensorMap = std::map<std::string, HostTensor>;

// NOT_FOUND if the file cannot be read; DATA_LOSS naming what is wrong if it is not valid
// safetensors (or holds a dtype other than F32 and I64).
absl::StatusOr<TensorMap> ReadSafetensors(const std::string& path);

// The file's bytes for `tensors` (F32), in the map's (name) order.
std::string EncodeSafetensors(const TensorMap& tensors);

// Writes atomically: to a temporary file, then renamed into place.
absl::Status WriteSafetensors(const std::string& path, const TensorMap& tensors);

HostTensor F32Tensor(std::vector<int64_t> shape, const float* data);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DATA_SAFETENSORS_H_
