#include "worker/cuda/cudnn_fused_attention.h"

#include <cstdint>

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/cudnn_requirements.h"
#include "worker/cuda/kernels.h"

namespace shardwise::cuda {
namespace {

size_t Rows(const AttentionShape& shape) { return static_cast<size_t>(shape.batch * shape.seq); }
size_t OutNumel(const AttentionShape& shape) { return Rows(shape) * shape.width(); }
size_t RowStatsNumel(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.heads * shape.seq);
}

// One buffer of q, k and v (or of their gradients) as cuDNN's graph names it: packed, the
// one qkv; apart, q, k and v.
template <typename T>
struct QkvPart {
  AttentionBuffer buffer;
  T* values;
  size_t n;
};

template <typename T>
std::vector<QkvPart<T>> Parts(const AttentionShape& shape, const QkvSpan<T*>& qkv, bool gradient) {
  const size_t q_n = OutNumel(shape);
  if (qkv.packed)
    return {{gradient ? AttentionBuffer::kDqkv : AttentionBuffer::kQkv, qkv.q, 3 * q_n}};
  const size_t kv_n = Rows(shape) * qkv.kv_heads * shape.head_dim;
  return {{gradient ? AttentionBuffer::kDq : AttentionBuffer::kQ, qkv.q, q_n},
          {gradient ? AttentionBuffer::kDk : AttentionBuffer::kK, qkv.k, kv_n},
          {gradient ? AttentionBuffer::kDv : AttentionBuffer::kV, qkv.v, kv_n}};
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

absl::StatusOr<std::vector<Buffer>> CudnnFusedAttention::NarrowedQkv(
    ScalarType operands, const AttentionShape& shape, const QkvSpan<const float*>& qkv,
    AttentionPointers* pointers) {
  std::vector<Buffer> narrow;
  for (const QkvPart<const float>& part : Parts(shape, qkv, /*gradient=*/false)) {
    ASSIGN_OR_RETURN(Buffer copy, Narrowed(operands, part.values, part.n));
    (*pointers)[part.buffer] = copy.as<void>();
    narrow.push_back(std::move(copy));
  }
  return narrow;
}

std::vector<Buffer> CudnnFusedAttention::GradientScratch(ScalarType operands,
                                                         const AttentionShape& shape,
                                                         const QkvSpan<float*>& dqkv,
                                                         AttentionPointers* pointers) const {
  std::vector<Buffer> grads;
  for (const QkvPart<float>& part : Parts(shape, dqkv, /*gradient=*/true)) {
    grads.push_back(Scratch(operands, part.n));
    (*pointers)[part.buffer] = grads.back().as<void>();
  }
  return grads;
}

absl::Status CudnnFusedAttention::Widened(ScalarType operands, const AttentionShape& shape,
                                          const std::vector<Buffer>& scratch,
                                          const QkvSpan<float*>& dqkv) {
  const std::vector<QkvPart<float>> parts = Parts(shape, dqkv, /*gradient=*/true);
  for (size_t i = 0; i < parts.size(); ++i) {
    RETURN_IF_CUDA_ERROR(
        Widen(operands, scratch[i].as<uint16_t>(), parts[i].values, parts[i].n, stream_));
  }
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::Forward(ScalarType operands, const AttentionShape& shape,
                                          const QkvSpan<const float*>& qkv, float* out,
                                          float* lse) {
  AttentionPointers pointers;
  ASSIGN_OR_RETURN(const std::vector<Buffer> qkv16, NarrowedQkv(operands, shape, qkv, &pointers));
  Buffer out16 = Scratch(operands, OutNumel(shape));
  pointers[AttentionBuffer::kOut] = out16.as<void>();
  pointers[AttentionBuffer::kStats] = lse;
  RETURN_IF_ERROR(runner_->Forward(AttentionLayout::Of(shape, qkv), GraphIo(operands), pointers));
  RETURN_IF_CUDA_ERROR(Widen(operands, out16.as<uint16_t>(), out, OutNumel(shape), stream_));
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::Backward(ScalarType operands, const AttentionShape& shape,
                                           const QkvSpan<const float*>& qkv, const float* out,
                                           const float* lse, const float* dout,
                                           const QkvSpan<float*>& dqkv) {
  AttentionPointers pointers;
  ASSIGN_OR_RETURN(const std::vector<Buffer> qkv16, NarrowedQkv(operands, shape, qkv, &pointers));
  ASSIGN_OR_RETURN(Buffer out16, Narrowed(operands, out, OutNumel(shape)));
  ASSIGN_OR_RETURN(Buffer dout16, Narrowed(operands, dout, OutNumel(shape)));
  const std::vector<Buffer> grads16 = GradientScratch(operands, shape, dqkv, &pointers);
  Buffer dots = Scratch(ScalarType::kFloat32, RowStatsNumel(shape));
  // A grouped layout's per-query-head K/V gradients, FP32, before each group's sum.
  const AttentionLayout layout = AttentionLayout::Of(shape, qkv);
  const auto per_query_head = static_cast<size_t>(AttentionGroupWorkingFloats(layout));
  Buffer dk_per_query_head, dv_per_query_head;
  if (per_query_head > 0) {
    dk_per_query_head = Scratch(ScalarType::kFloat32, per_query_head);
    dv_per_query_head = Scratch(ScalarType::kFloat32, per_query_head);
    pointers[AttentionBuffer::kDkPerQueryHead] = dk_per_query_head.data();
    pointers[AttentionBuffer::kDvPerQueryHead] = dv_per_query_head.data();
  }
  // cuDNN reads its pointers as non-const; it writes only the gradients and dots.
  pointers[AttentionBuffer::kOut] = out16.as<void>();
  pointers[AttentionBuffer::kStats] = const_cast<float*>(lse);
  pointers[AttentionBuffer::kDout] = dout16.as<void>();
  pointers[AttentionBuffer::kDots] = dots.data();
  RETURN_IF_ERROR(runner_->Backward(layout, GraphIo(operands), pointers));
  return Widened(operands, shape, grads16, dqkv);
}

}  // namespace shardwise::cuda
