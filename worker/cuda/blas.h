#ifndef SHARDWISE_WORKER_CUDA_BLAS_H_
#define SHARDWISE_WORKER_CUDA_BLAS_H_

// The Linear layer's GEMMs through cuBLAS, row-major with PyTorch's conventions (weight
// [out, in], y = x W^T + b), like compute/cpu/linear.h on the CPU; types as gemm_types.h
// says. TF32 is off unless the job asks for it: parity with the CPU path needs full FP32
// products (PyTorch also defaults matmuls to no TF32). A forward with a bias or a GELU
// after it goes through cuBLASLt's epilogues (blas_lt.h) where it has an algorithm for
// them; otherwise the bias, FP32 or 16-bit, is broadcast into y first and the GEMM adds to
// it (beta = 1: the sum in FP32, rounded once to y's type), the same values. A bias's
// gradient is a reduction (kernels.h AddColumnSums).
//
// Thread-safety: none; one Blas per stream.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "worker/cuda/blas_lt.h"
#include "worker/cuda/gemm_epilogue.h"
#include "worker/cuda/gemm_types.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

class Blas {
 public:
  static absl::StatusOr<std::unique_ptr<Blas>> Create(cudaStream_t stream);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // FP32 GEMMs may use TF32 tensor cores (10-bit mantissa products).
  void set_allow_tf32(bool allow) { allow_tf32_ = allow; }

  using Types = GemmTypes;

  // y[batch, out] = x[batch, in] W[out, in]^T (+ b[out] if b is not null).
  absl::Status LinearForward(const void* x, const void* w, ConstTensorRef b, int64_t batch,
                             int64_t in, int64_t out, void* y, Types types = {});
  // The same through cuBLASLt's `epilogue` (gemm_epilogue.h; b not null where it adds
  // one); the GELU epilogues write pre = x W^T + b and y = GELU(pre), both of
  // types.output. UNIMPLEMENTED where cuBLASLt has no algorithm for it (nothing written).
  absl::Status LinearEpilogueForward(const void* x, const void* w, ConstTensorRef b, int64_t batch,
                                     int64_t in, int64_t out, void* pre, void* y,
                                     LinearEpilogue epilogue, Types types);
  // dx[batch, in] = (dy W) * GELU'(pre) through cuBLASLt's `epilogue` (kDGelu), pre
  // [batch, in] the forward's kept input; dx and pre of types.output. UNIMPLEMENTED where
  // cuBLASLt has no algorithm for it (nothing written). The weight's gradient is
  // LinearBackward's (dx null).
  absl::Status LinearInputGradEpilogue(const void* w, const void* dy, int64_t batch, int64_t in,
                                       int64_t out, const void* pre, void* dx,
                                       LinearEpilogue epilogue, Types types);
  // Which GELU the epilogues compute (blas_lt.h ProbeGeluEpilogues; waits for the stream).
  absl::StatusOr<GeluEpilogueFormulas> ProbeGelu() { return ProbeGeluEpilogues(*lt_, stream_); }
  // dx[batch, in] = dy W (skipped when dx is null); dw[out, in] += dy^T x (FP32). The
  // bias's gradient is a reduction, not a GEMM: the caller adds it.
  absl::Status LinearBackward(const void* x, const void* w, const void* dy, int64_t batch,
                              int64_t in, int64_t out, void* dx, float* dw, Types types = {});

  // C[m, n] = A[m, k] B[k, n] (+ beta C), row-major, no transposes: for benchmarks
  // against cublasGemmEx called directly.
  absl::Status Gemm(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                    float beta, Types types = {});

  // One operand of a batch of GEMMs: matrix i starts `stride` elements after matrix i - 1.
  struct Strided {
    const void* data;
    int64_t ld;
    int64_t stride;
  };
  // Column-major (cuBLAS's convention) C_i = op(A_i) op(B_i) + beta C_i for i < count:
  // attention's per-head products (attention.h states them row-major).
  absl::Status GemmStridedBatched(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m,
                                  int64_t n, int64_t k, Strided a, Strided b, float beta, void* c,
                                  int64_t ldc, int64_t stride_c, int64_t count, Types types);

 private:
  Blas(cublasHandle_t handle, std::unique_ptr<BlasLt> lt, cudaStream_t stream)
      : handle_(handle), lt_(std::move(lt)), stream_(stream) {}
  absl::StatusOr<cublasComputeType_t> ComputeType(Types types) const {
    return GemmComputeType(types, allow_tf32_);
  }
  // Column-major C = op(A) op(B) + beta C (cuBLAS's own convention).
  absl::Status GemmColumnMajor(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n,
                               int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                               float beta, void* c, int64_t ldc, Types types);
  // The same for a GEMM described as cuBLASLt takes it (its epilogue not applied):
  // D = op(A) B + beta D.
  absl::Status GemmColumnMajor(const BlasLt::Matmul& gemm, float beta, Types types);

  cublasHandle_t handle_;
  std::unique_ptr<BlasLt> lt_;
  cudaStream_t stream_;
  bool allow_tf32_ = false;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_BLAS_H_
