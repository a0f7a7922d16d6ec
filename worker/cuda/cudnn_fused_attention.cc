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

// The elements of q, of k (and of v), packed: all three in one buffer.
size_t QNumel(const AttentionShape& shape) { return OutNumel(shape); }
template <typename T>
size_t KvNumel(const AttentionShape& shape, const QkvSpan<T>& qkv) {
  return Rows(shape) * qkv.kv_heads * shape.head_dim;
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

absl::StatusOr<CudnnFusedAttention::QkvScratch> CudnnFusedAttention::NarrowedQkv(
    ScalarType operands, const AttentionShape& shape, const QkvSpan<const float>& qkv,
    AttentionPointers* pointers) {
  QkvScratch narrow;
  if (qkv.packed) {
    ASSIGN_OR_RETURN(narrow.qkv, Narrowed(operands, qkv.q, 3 * QNumel(shape)));
    (*pointers)[AttentionBuffer::kQkv] = narrow.qkv.as<void>();
    return narrow;
  }
  ASSIGN_OR_RETURN(narrow.q, Narrowed(operands, qkv.q, QNumel(shape)));
  ASSIGN_OR_RETURN(narrow.k, Narrowed(operands, qkv.k, KvNumel(shape, qkv)));
  ASSIGN_OR_RETURN(narrow.v, Narrowed(operands, qkv.v, KvNumel(shape, qkv)));
  (*pointers)[AttentionBuffer::kQ] = narrow.q.as<void>();
  (*pointers)[AttentionBuffer::kK] = narrow.k.as<void>();
  (*pointers)[AttentionBuffer::kV] = narrow.v.as<void>();
  return narrow;
}

CudnnFusedAttention::QkvScratch CudnnFusedAttention::GradientScratch(
    ScalarType operands, const AttentionShape& shape, const QkvSpan<const float>& qkv,
    AttentionPointers* pointers) const {
  QkvScratch grads;
  if (qkv.packed) {
    grads.qkv = Scratch(operands, 3 * QNumel(shape));
    (*pointers)[AttentionBuffer::kDqkv] = grads.qkv.as<void>();
    return grads;
  }
  grads.q = Scratch(operands, QNumel(shape));
  grads.k = Scratch(operands, KvNumel(shape, qkv));
  grads.v = Scratch(operands, KvNumel(shape, qkv));
  (*pointers)[AttentionBuffer::kDq] = grads.q.as<void>();
  (*pointers)[AttentionBuffer::kDk] = grads.k.as<void>();
  (*pointers)[AttentionBuffer::kDv] = grads.v.as<void>();
  return grads;
}

absl::Status CudnnFusedAttention::Widened(ScalarType operands, const AttentionShape& shape,
                                          QkvScratch& grads, const QkvSpan<float>& dqkv) {
  if (dqkv.packed) {
    RETURN_IF_CUDA_ERROR(
        Widen(operands, grads.qkv.as<uint16_t>(), dqkv.q, 3 * QNumel(shape), stream_));
    return absl::OkStatus();
  }
  RETURN_IF_CUDA_ERROR(Widen(operands, grads.q.as<uint16_t>(), dqkv.q, QNumel(shape), stream_));
  RETURN_IF_CUDA_ERROR(
      Widen(operands, grads.k.as<uint16_t>(), dqkv.k, KvNumel(shape, dqkv), stream_));
  RETURN_IF_CUDA_ERROR(
      Widen(operands, grads.v.as<uint16_t>(), dqkv.v, KvNumel(shape, dqkv), stream_));
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::Forward(ScalarType operands, const AttentionShape& shape,
                                          const QkvSpan<const float>& qkv, float* out, float* lse) {
  AttentionPointers pointers;
  ASSIGN_OR_RETURN(QkvScratch qkv16, NarrowedQkv(operands, shape, qkv, &pointers));
  Buffer out16 = Scratch(operands, OutNumel(shape));
  pointers[AttentionBuffer::kOut] = out16.as<void>();
  pointers[AttentionBuffer::kStats] = lse;
  RETURN_IF_ERROR(runner_->Forward(AttentionLayout::Of(shape, qkv), GraphIo(operands), pointers));
  RETURN_IF_CUDA_ERROR(Widen(operands, out16.as<uint16_t>(), out, OutNumel(shape), stream_));
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::Backward(ScalarType operands, const AttentionShape& shape,
                                           const QkvSpan<const float>& qkv, const float* out,
                                           const float* lse, const float* dout,
                                           const QkvSpan<float>& dqkv) {
  if (!qkv.SameLayout(dqkv)) {
    return absl::InvalidArgumentError(
        "the attention's gradients are not laid out as its q, k and v");
  }
  AttentionPointers pointers;
  ASSIGN_OR_RETURN(QkvScratch qkv16, NarrowedQkv(operands, shape, qkv, &pointers));
  ASSIGN_OR_RETURN(Buffer out16, Narrowed(operands, out, OutNumel(shape)));
  ASSIGN_OR_RETURN(Buffer dout16, Narrowed(operands, dout, OutNumel(shape)));
  QkvScratch grads16 = GradientScratch(operands, shape, qkv, &pointers);
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
