#ifndef SHARDWISE_WORKER_CUDA_TYPED_OPERAND_H_
#define SHARDWISE_WORKER_CUDA_TYPED_OPERAND_H_

// Values as a kernel that reads `type` takes them (a 16-bit GEMM's operands, cuDNN's
// attention tensors): in place where they are stored in `type` (Device::StorageType's
// 16-bit storage), else a copy narrowed from their FP32 storage, which is exact because
// they hold values of `type` already. The copy comes from `allocator` and is made on
// `stream`; whatever reads it must run on that stream, before this is destroyed.
//
// Thread-safety: none; one operation's, on the thread that issues it.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

class TypedOperand {
 public:
  TypedOperand(ScalarType type, ConstTensorRef values, size_t n, Allocator* allocator,
               cudaStream_t stream);

  // The narrowing's launch error, if any.
  const absl::Status& status() const { return status_; }
  // The values in `type` (non-const: cuDNN takes its pointers so; nothing writes them).
  void* data() const { return const_cast<void*>(data_); }
  // Element `offset` of the values.
  const void* at(int64_t offset) const {
    return static_cast<const char*>(data_) + offset * static_cast<int64_t>(ElementSize(type_));
  }

 private:
  ScalarType type_;
  Buffer copy_;
  const void* data_;
  absl::Status status_;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_TYPED_OPERAND_H_
