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
template <typename Ref>
struct QkvPart {
  AttentionBuffer buffer;
  Ref values;
  size_t n;
};

template <typename Ref>
std::vector<QkvPart<Ref>> Parts(const AttentionShape& shape, const QkvSpan<Ref>& qkv,
                                bool gradient) {
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

absl::StatusOr<void*> CudnnFusedAttention::Input(ScalarType operands, ConstTensorRef value,
                                                 size_t n, std::vector<TypedOperand>* copies) {
  copies->emplace_back(operands, value, n, allocator_, stream_);
  RETURN_IF_ERROR(copies->back().status());
  return copies->back().data();
}

void* CudnnFusedAttention::Output(ScalarType operands, TensorRef value, size_t n,
                                  std::vector<PendingWiden>* pending) const {
  if (value.type() == operands) return value.data();
  pending->push_back({Scratch(operands, n), value.f32(), n});
  return pending->back().scratch.as<void>();
}

absl::Status CudnnFusedAttention::WidenPending(ScalarType operands,
                                               const std::vector<PendingWiden>& pending) {
  for (const PendingWiden& result : pending) {
    RETURN_IF_CUDA_ERROR(
        Widen(operands, result.scratch.as<uint16_t>(), result.target, result.n, stream_));
  }
  return absl::OkStatus();
}

absl::Status CudnnFusedAttention::BindInputs(ScalarType operands, const AttentionShape& shape,
                                             const QkvSpan<ConstTensorRef>& qkv,
                                             AttentionPointers* pointers,
                                             std::vector<TypedOperand>* copies) {
  for (const QkvPart<ConstTensorRef>& part : Parts(shape, qkv, /*gradient=*/false)) {
    ASSIGN_OR_RETURN((*pointers)[part.buffer], Input(operands, part.values, part.n, copies));
  }
  return absl::OkStatus();
}

void CudnnFusedAttention::BindGradients(ScalarType operands, const AttentionShape& shape,
                                        const QkvSpan<TensorRef>& dqkv, AttentionPointers* pointers,
                                        std::vector<PendingWiden>* pending) const {
  for (const QkvPart<TensorRef>& part : Parts(shape, dqkv, /*gradient=*/true)) {
    (*pointers)[part.buffer] = Output(operands, part.values, part.n, pending);
  }
}

absl::Status CudnnFusedAttention::Forward(ScalarType operands, const AttentionShape& shape,
                                          const QkvSpan<ConstTensorRef>& qkv, TensorRef out,
                                          float* lse) {
  AttentionPointers pointers;
  std::vector<TypedOperand> copies;
  std::vector<PendingWiden> pending;
  RETURN_IF_ERROR(BindInputs(operands, shape, qkv, &pointers, &copies));
  pointers[AttentionBuffer::kOut] = Output(operands, out, OutNumel(shape), &pending);
  pointers[AttentionBuffer::kStats] = lse;
  RETURN_IF_ERROR(runner_->Forward(AttentionLayout::Of(shape, qkv), GraphIo(operands), pointers));
  return WidenPending(operands, pending);
}

absl::Status CudnnFusedAttention::Backward(ScalarType operands, const AttentionShape& shape,
                                           const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                           const float* lse, ConstTensorRef dout,
                                           const QkvSpan<TensorRef>& dqkv) {
  AttentionPointers pointers;
  std::vector<TypedOperand> copies;
  std::vector<PendingWiden> pending;
  RETURN_IF_ERROR(BindInputs(operands, shape, qkv, &pointers, &copies));
  ASSIGN_OR_RETURN(pointers[AttentionBuffer::kOut], Input(operands, out, OutNumel(shape), &copies));
  ASSIGN_OR_RETURN(pointers[AttentionBuffer::kDout],
                   Input(operands, dout, OutNumel(shape), &copies));
  BindGradients(operands, shape, dqkv, &pointers, &pending);
  Buffer dots = Scratch(ScalarType::kFloat32, RowStatsNumel(shape));
  pointers[AttentionBuffer::kStats] = const_cast<float*>(lse);
  pointers[AttentionBuffer::kDots] = dots.data();
  RETURN_IF_ERROR(runner_->Backward(AttentionLayout::Of(shape, qkv), GraphIo(operands), pointers));
  return WidenPending(operands, pending);
}

}  // namespace shardwise::cuda
