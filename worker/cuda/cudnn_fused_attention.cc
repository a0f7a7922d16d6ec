#include "worker/cuda/cudnn_fused_attention.h"

#include <cstdint>

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cudnn_requirements.h"
#include "worker/cuda/kernels.h"

namespace shardwise::cuda {
namespace {

size_t QkvNumel(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.seq * 3 * shape.width());
}
size_t OutNumel(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.seq * shape.width());
}
size_t RowStatsNumel(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.heads * shape.seq);
}

}  // namespace

Buffer CudnnFusedAttention::Scratch(ScalarType type, size_t n) const {
  return Buffer(allocator_, n, MemoryCategory::kActivations, type, /*zero=*/false);
}

absl::StatusOr<Buffer> CudnnFusedAttention::Narrowed(ScalarType operands, const float* from,
                                                     size_t n) {
  Buffer narrow = Scratch(operands, n);
  RETURN_IF_CUDA_ERROR(Narrow(operands, from, narrow.as<uint16_t>(), n, stream_));
  return narrow;
}

absl::Status CudnnFusedAttention::Forward(ScalarType operands, const AttentionShape& shape,
                                          const float* qkv, float* out, float* lse) {
  ASSIGN_OR_RETURN(Buffer qkv16, Narrowed(operands, qkv, QkvNumel(shape)));
  Buffer out16 = Scratch(operands, OutNumel(shape));
  RETURN_IF_ERROR(runner_->Forward(AttentionLayout::Packed(shape), GraphIo(operands),
                                   {{AttentionBuffer::kQkv, qkv16.as<void>()},
                                    {AttentionBuffer::kOut, out16.as<void>()},
                                    {AttentionBuffer::kStats, lse}}));
  RETURN_IF_CUDA_ERROR(Widen(operands, out16.as<uint16_t>(), out, OutNumel(shape), stream_));
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::Backward(ScalarType operands, const AttentionShape& shape,
                                           const float* qkv, const float* out, const float* lse,
                                           const float* dout, float* dqkv) {
  ASSIGN_OR_RETURN(Buffer qkv16, Narrowed(operands, qkv, QkvNumel(shape)));
  ASSIGN_OR_RETURN(Buffer out16, Narrowed(operands, out, OutNumel(shape)));
  ASSIGN_OR_RETURN(Buffer dout16, Narrowed(operands, dout, OutNumel(shape)));
  Buffer dqkv16 = Scratch(operands, QkvNumel(shape));
  Buffer dots = Scratch(ScalarType::kFloat32, RowStatsNumel(shape));
  // cuDNN reads its pointers as non-const; it writes only the gradients and dots.
  RETURN_IF_ERROR(runner_->Backward(AttentionLayout::Packed(shape), GraphIo(operands),
                                    {{AttentionBuffer::kQkv, qkv16.as<void>()},
                                     {AttentionBuffer::kOut, out16.as<void>()},
                                     {AttentionBuffer::kStats, const_cast<float*>(lse)},
                                     {AttentionBuffer::kDout, dout16.as<void>()},
                                     {AttentionBuffer::kDqkv, dqkv16.as<void>()},
                                     {AttentionBuffer::kDots, dots.data()}}));
  RETURN_IF_CUDA_ERROR(Widen(operands, dqkv16.as<uint16_t>(), dqkv, QkvNumel(shape), stream_));
  return absl::OkStatus();
}

}  // namespace shardwise::cuda
