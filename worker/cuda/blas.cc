#include "worker/cuda/blas.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/kernels.h"

namespace shardwise::cuda {
namespace {

// A Linear's two GEMMs that cuBLASLt's epilogues finish, as column-major products. Row-major
// X[r, c] is column-major X^T[c, r] with the same leading dimension c, so each row-major
// product is computed as its transpose: (A B)^T = B^T A^T.

// y^T[out, batch] = W[out, in] x^T[in, batch].
BlasLt::Matmul ForwardGemm(const void* x, const void* w, int64_t batch, int64_t in, int64_t out,
                           void* y) {
  BlasLt::Matmul gemm;
  gemm.transpose_a = true;
  gemm.m = out, gemm.n = batch, gemm.k = in;
  gemm.a = w, gemm.lda = in;
  gemm.b = x, gemm.ldb = in;
  gemm.d = y, gemm.ldd = out;
  return gemm;
}

// dx^T[in, batch] = W^T[in, out] dy^T[out, batch].
BlasLt::Matmul InputGradGemm(const void* w, const void* dy, int64_t batch, int64_t in, int64_t out,
                             void* dx) {
  BlasLt::Matmul gemm;
  gemm.m = in, gemm.n = batch, gemm.k = out;
  gemm.a = w, gemm.lda = in;
  gemm.b = dy, gemm.ldb = out;
  gemm.d = dx, gemm.ldd = in;
  return gemm;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Blas>> Blas::Create(cudaStream_t stream) {
  cublasHandle_t handle = nullptr;
  RETURN_IF_ERROR(CublasStatus(cublasCreate(&handle), "cublasCreate"));
  absl::Status status = CublasStatus(cublasSetStream(handle, stream), "cublasSetStream");
  if (!status.ok()) {
    cublasDestroy(handle);
    return status;
  }
  absl::StatusOr<std::unique_ptr<BlasLt>> lt = BlasLt::Create(stream);
  if (!lt.ok()) {
    cublasDestroy(handle);
    return lt.status();
  }
  return std::unique_ptr<Blas>(new Blas(handle, std::move(*lt), stream));
}

Blas::~Blas() { cublasDestroy(handle_); }

absl::Status Blas::GemmColumnMajor(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                                   int64_t n, int64_t k, const void* a, int64_t lda, const void* b,
                                   int64_t ldb, float beta, void* c, int64_t ldc, Types types) {
  ASSIGN_OR_RETURN(const cublasComputeType_t compute, ComputeType(types));
  const float alpha = 1.0f;
  return CublasStatus(cublasGemmEx(handle_, op_a, op_b, static_cast<int>(m), static_cast<int>(n),
                                   static_cast<int>(k), &alpha, a, GemmDataType(types.operands),
                                   static_cast<int>(lda), b, GemmDataType(types.operands),
                                   static_cast<int>(ldb), &beta, c, GemmDataType(types.output),
                                   static_cast<int>(ldc), compute, CUBLAS_GEMM_DEFAULT),
                      "cublasGemmEx");
}

absl::Status Blas::GemmColumnMajor(const BlasLt::Matmul& gemm, float beta, Types types) {
  return GemmColumnMajor(gemm.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, gemm.m, gemm.n,
                         gemm.k, gemm.a, gemm.lda, gemm.b, gemm.ldb, beta, gemm.d, gemm.ldd, types);
}

absl::Status Blas::GemmStridedBatched(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                                      int64_t n, int64_t k, Strided a, Strided b, float beta,
                                      void* c, int64_t ldc, int64_t stride_c, int64_t count,
                                      Types types) {
  ASSIGN_OR_RETURN(const cublasComputeType_t compute, ComputeType(types));
  const float alpha = 1.0f;
  return CublasStatus(
      cublasGemmStridedBatchedEx(handle_, op_a, op_b, static_cast<int>(m), static_cast<int>(n),
                                 static_cast<int>(k), &alpha, a.data, GemmDataType(types.operands),
                                 static_cast<int>(a.ld), a.stride, b.data,
                                 GemmDataType(types.operands), static_cast<int>(b.ld), b.stride,
                                 &beta, c, GemmDataType(types.output), static_cast<int>(ldc),
                                 stride_c, static_cast<int>(count), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
}

absl::Status Blas::LinearForward(const void* x, const void* w, ConstTensorRef b, int64_t batch,
                                 int64_t in, int64_t out, void* y, Types types) {
  float beta = 0.0f;
  if (!b.null()) {
    const absl::Status fused =
        LinearEpilogueForward(x, w, b, batch, in, out, nullptr, y, LinearEpilogue::kBias, types);
    if (!absl::IsUnimplemented(fused)) return fused;
    RETURN_IF_CUDA_ERROR(BroadcastRows(b, batch, out, TensorRef(y, types.output), stream_));
    beta = 1.0f;
  }
  return GemmColumnMajor(ForwardGemm(x, w, batch, in, out, y), beta, types);
}

absl::Status Blas::LinearEpilogueForward(const void* x, const void* w, ConstTensorRef b,
                                         int64_t batch, int64_t in, int64_t out, void* pre, void* y,
                                         LinearEpilogue epilogue, Types types) {
  BlasLt::Matmul call = ForwardGemm(x, w, batch, in, out, y);
  call.epilogue = epilogue;
  call.bias = b;
  call.aux = pre;
  call.types = types;
  call.allow_tf32 = allow_tf32_;
  return lt_->Run(call);
}

absl::Status Blas::LinearInputGradEpilogue(const void* w, const void* dy, int64_t batch, int64_t in,
                                           int64_t out, const void* pre, void* dx,
                                           LinearEpilogue epilogue, Types types) {
  // GELU's input is read, not written, through the epilogue's one pointer.
  BlasLt::Matmul call = InputGradGemm(w, dy, batch, in, out, dx);
  call.epilogue = epilogue;
  call.aux = const_cast<void*>(pre);
  call.types = types;
  call.allow_tf32 = allow_tf32_;
  return lt_->Run(call);
}

absl::Status Blas::LinearBackward(const void* x, const void* w, const void* dy, int64_t batch,
                                  int64_t in, int64_t out, void* dx, float* dw, Types types) {
  if (dx != nullptr) {
    RETURN_IF_ERROR(GemmColumnMajor(InputGradGemm(w, dy, batch, in, out, dx), 0.0f, types));
  }
  // dw^T[in, out] += x^T[in, batch] dy[batch, out]
  return GemmColumnMajor(CUBLAS_OP_N, CUBLAS_OP_T, in, out, batch, x, in, dy, out, 1.0f, dw, in,
                         {types.operands, ScalarType::kFloat32});
}

absl::Status Blas::Gemm(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                        float beta, Types types) {
  // C^T[n, m] = B^T[n, k] A^T[k, m]
  return GemmColumnMajor(CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, b, n, a, k, beta, c, n, types);
}

}  // namespace shardwise::cuda
