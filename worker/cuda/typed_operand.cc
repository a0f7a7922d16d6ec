#include "worker/cuda/typed_operand.h"

#include "absl/strings/str_cat.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/kernels.h"

namespace shardwise::cuda {

TypedOperand::TypedOperand(ScalarType type, ConstTensorRef values, size_t n, Allocator* allocator,
                           cudaStream_t stream)
    : type_(type), data_(values.data()) {
  if (values.type() == type) return;
  if (!values.is_float()) {
    // Only FP32 storage is narrowed; BF16 values stored as FP16 (or the other way round)
    // are a caller's mistake, not values to reinterpret.
    status_ = absl::InternalError(absl::StrCat("a ", ScalarTypeName(type), " operand stored as ",
                                               ScalarTypeName(values.type()),
                                               ": only FP32 storage is narrowed"));
    return;
  }
  copy_ = Buffer(allocator, n, MemoryCategory::kActivations, type, /*zero=*/false);
  status_ = CudaStatus(Narrow(type, values.f32(), copy_.as<uint16_t>(), n, stream),
                       "Narrow (a 16-bit operand)");
  data_ = copy_.as<uint16_t>();
}

}  // namespace shardwise::cuda
