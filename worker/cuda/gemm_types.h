#ifndef SHARDWISE_WORKER_CUDA_GEMM_TYPES_H_
#define SHARDWISE_WORKER_CUDA_GEMM_TYPES_H_

// The element types of a GEMM and what cuBLAS and cuBLASLt call them: one rule for both
// (blas.h, blas_lt.h). Operands are FP32, or FP16/BF16 (mixed precision's param_dtype)
// with FP32 accumulation; outputs FP32 or the operands' type. FP32 products may use TF32
// tensor cores only where the job asks for it.

#include <cublas_api.h>
#include <library_types.h>

#include "absl/status/statusor.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::cuda {

// Element types: `operands` for x, w and dy; `output` for y and dx (FP32 or the operands'
// type). A weight's gradient dw accumulates in FP32.
struct GemmTypes {
  ScalarType operands = ScalarType::kFloat32;
  ScalarType output = ScalarType::kFloat32;
};

cudaDataType_t GemmDataType(ScalarType type);
// The compute type for `types`, or INVALID_ARGUMENT naming unsupported ones.
absl::StatusOr<cublasComputeType_t> GemmComputeType(GemmTypes types, bool allow_tf32);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_GEMM_TYPES_H_
