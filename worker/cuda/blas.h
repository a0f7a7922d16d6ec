#ifndef SHARDWISE_WORKER_CUDA_BLAS_H_
#define SHARDWISE_WORKER_CUDA_BLAS_H_

// The Linear layer's GEMMs through cuBLAS, row-major with PyTorch's conventions (weight
// [out, in], y = x W^T + b), like compute/cpu/linear.h on the CPU. Operands are FP32, or
// FP16/BF16 (mixed precision's param_dtype) with FP32 accumulation; outputs FP32 or the
// operands' type. TF32 is off unless the job asks for it: parity with the CPU path needs
// full FP32 products (PyTorch also defaults matmuls to no TF32).
//
// Thread-safety: none; one Blas per stream.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

// Element types: `operands` for x, w and dy; `output` for y and dx (FP32 or the operands'
// type). A weight's gradient dw accumulates in FP32. The bias of y, FP32 or 16-bit, is
// broadcast into y first and the GEMM adds to it (beta = 1: the sum in FP32, rounded
// once to y's type); its gradient is a reduction (kernels.h AddColumnSums).
struct GemmTypes {
  ScalarType operands = ScalarType::kFloat32;
  ScalarType output = ScalarType::kFloat32;
};

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
  Blas(cublasHandle_t handle, cudaStream_t stream) : handle_(handle), stream_(stream) {}
  // The cuBLAS compute type for `types`, or INVALID_ARGUMENT naming unsupported ones.
  absl::StatusOr<cublasComputeType_t> ComputeType(Types types) const;
  // Column-major C = op(A) op(B) + beta C (cuBLAS's own convention).
  absl::Status GemmColumnMajor(cublasOperation_t op_a, cublasOperation_t op_b, int64_t m, int64_t n,
                               int64_t k, const void* a, int64_t lda, const void* b, int64_t ldb,
                               float beta, void* c, int64_t ldc, Types types);

  cublasHandle_t handle_;
  cudaStream_t stream_;
  bool allow_tf32_ = false;
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_BLAS_H_
