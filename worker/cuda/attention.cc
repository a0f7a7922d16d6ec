#include "worker/cuda/attention.h"

#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/kernels.h"
#include "worker/cuda/transformer_kernels.h"
#include "worker/cuda/typed_operand.h"

namespace shardwise::cuda {
namespace {

// A GEMM operand in the context's operands' type (typed_operand.h).
TypedOperand GemmOperand(const AttentionContext& context, ConstTensorRef values, size_t n) {
  return TypedOperand(context.operands, values, n, context.allocator, context.stream);
}

// Offsets of sequence b's parts in the row-major tensors (elements).
struct Layout {
  const AttentionShape& shape;
  int64_t qkv_ld() const { return 3 * shape.width(); }
  // part 0: q, 1: k, 2: v
  int64_t qkv(int64_t b, int part) const { return b * shape.seq * qkv_ld() + part * shape.width(); }
  int64_t out(int64_t b) const { return b * shape.seq * shape.width(); }
  int64_t scores(int64_t b) const { return b * shape.heads * square(); }
  int64_t square() const { return shape.seq * shape.seq; }
};

// The products' types: into FP32 scores, or into `output`'s storage.
Blas::Types Types(const AttentionContext& context, ScalarType output = ScalarType::kFloat32) {
  return {context.operands, output};
}

}  // namespace

// Row-major products as their column-major transposes (blas.cc explains the trick); the
// batch runs over the heads of one sequence, head h hd columns after head h - 1.
absl::Status AttentionForward(const AttentionContext& context, const AttentionShape& shape,
                              ConstTensorRef qkv, TensorRef out, float* probs) {
  const Layout at{shape};
  const int64_t t = shape.seq, hd = shape.head_dim, ld = at.qkv_ld();
  const TypedOperand qkv_in = GemmOperand(context, qkv, shape.batch * t * ld);
  RETURN_IF_ERROR(qkv_in.status());
  for (int64_t b = 0; b < shape.batch; ++b) {
    // S^T[t, t] = k q^T
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_T, CUBLAS_OP_N, t, t, hd, {qkv_in.at(at.qkv(b, 1)), ld, hd},
        {qkv_in.at(at.qkv(b, 0)), ld, hd}, 0.0f, probs + at.scores(b), t, at.square(), shape.heads,
        Types(context)));
  }
  RETURN_IF_CUDA_ERROR(CausalSoftmaxForward(probs, shape.batch * shape.heads * t, t,
                                            AttentionScale<float>(hd), context.stream));
  const TypedOperand p = GemmOperand(context, probs, shape.batch * shape.heads * at.square());
  RETURN_IF_ERROR(p.status());
  for (int64_t b = 0; b < shape.batch; ++b) {
    // out^T[hd, t] = v^T P^T
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_N, CUBLAS_OP_N, hd, t, t, {qkv_in.at(at.qkv(b, 2)), ld, hd},
        {p.at(at.scores(b)), t, at.square()}, 0.0f, (out + at.out(b)).data(), shape.width(), hd,
        shape.heads, Types(context, out.type())));
  }
  return absl::OkStatus();
}

absl::Status AttentionBackward(const AttentionContext& context, const AttentionShape& shape,
                               ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                               TensorRef dqkv) {
  const Layout at{shape};
  const int64_t t = shape.seq, hd = shape.head_dim, ld = at.qkv_ld(), c = shape.width();
  const int64_t scores = shape.batch * shape.heads * at.square();
  const TypedOperand qkv_in = GemmOperand(context, qkv, shape.batch * t * ld);
  const TypedOperand dout_in = GemmOperand(context, dout, shape.batch * t * c);
  const TypedOperand p = GemmOperand(context, probs, scores);
  RETURN_IF_ERROR(qkv_in.status());
  RETURN_IF_ERROR(dout_in.status());
  RETURN_IF_ERROR(p.status());
  Buffer ds(context.allocator, scores, MemoryCategory::kActivations, false);
  for (int64_t b = 0; b < shape.batch; ++b) {
    // dP^T[t, t] = v dout^T
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_T, CUBLAS_OP_N, t, t, hd, {qkv_in.at(at.qkv(b, 2)), ld, hd},
        {dout_in.at(at.out(b)), c, hd}, 0.0f, ds.data() + at.scores(b), t, at.square(), shape.heads,
        Types(context)));
    // dv^T[hd, t] = dout^T P
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_N, CUBLAS_OP_T, hd, t, t, {dout_in.at(at.out(b)), c, hd},
        {p.at(at.scores(b)), t, at.square()}, 0.0f, (dqkv + at.qkv(b, 2)).data(), ld, hd,
        shape.heads, Types(context, dqkv.type())));
  }
  // dS in dP's place; probs are FP32 here whatever the operands.
  RETURN_IF_CUDA_ERROR(CausalSoftmaxBackward(probs, ds.data(), shape.batch * shape.heads * t, t,
                                             AttentionScale<float>(hd), context.stream));
  const TypedOperand ds_in = GemmOperand(context, ds.data(), scores);
  RETURN_IF_ERROR(ds_in.status());
  for (int64_t b = 0; b < shape.batch; ++b) {
    // dq^T[hd, t] = k^T dS^T
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_N, CUBLAS_OP_N, hd, t, t, {qkv_in.at(at.qkv(b, 1)), ld, hd},
        {ds_in.at(at.scores(b)), t, at.square()}, 0.0f, (dqkv + at.qkv(b, 0)).data(), ld, hd,
        shape.heads, Types(context, dqkv.type())));
    // dk^T[hd, t] = q^T dS
    RETURN_IF_ERROR(context.blas->GemmStridedBatched(
        CUBLAS_OP_N, CUBLAS_OP_T, hd, t, t, {qkv_in.at(at.qkv(b, 0)), ld, hd},
        {ds_in.at(at.scores(b)), t, at.square()}, 0.0f, (dqkv + at.qkv(b, 1)).data(), ld, hd,
        shape.heads, Types(context, dqkv.type())));
  }
  return absl::OkStatus();
}

}  // namespace shardwise::cuda
