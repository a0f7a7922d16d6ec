#ifndef SHARDWISE_WORKER_RUNTIME_SCALAR_TYPE_H_
#define SHARDWISE_WORKER_RUNTIME_SCALAR_TYPE_H_

// Element types of runtime buffers and collectives. FP16 and BF16 are stored as their
// 16-bit patterns (uint16_t); compute/casts.h converts them.

#include <cstddef>
#include <cstdint>

namespace shardwise {

enum class ScalarType { kFloat32, kFloat16, kBFloat16, kInt64, kFloat64 };

constexpr size_t ElementSize(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      return 4;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return 2;
    case ScalarType::kInt64:
    case ScalarType::kFloat64:
      return 8;
  }
  return 0;
}

constexpr const char* ScalarTypeName(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat32:
      return "FP32";
    case ScalarType::kFloat16:
      return "FP16";
    case ScalarType::kBFloat16:
      return "BF16";
    case ScalarType::kInt64:
      return "INT64";
    case ScalarType::kFloat64:
      return "FP64";
  }
  return "?";
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_RUNTIME_SCALAR_TYPE_H_
