#include "worker/cuda/gemm_types.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardwise::cuda {

cudaDataType_t GemmDataType(ScalarType type) {
  switch (type) {
    case ScalarType::kFloat16:
      return CUDA_R_16F;
    case ScalarType::kBFloat16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

absl::StatusOr<cublasComputeType_t> GemmComputeType(GemmTypes types, bool allow_tf32) {
  auto unsupported = [](ScalarType t) {
    return t == ScalarType::kInt64 || t == ScalarType::kFloat64;
  };
  if (unsupported(types.operands) || unsupported(types.output) ||
      (types.output != ScalarType::kFloat32 && types.output != types.operands)) {
    return absl::InvalidArgumentError(absl::StrCat("GEMM: unsupported types: operands ",
                                                   ScalarTypeName(types.operands), ", output ",
                                                   ScalarTypeName(types.output)));
  }
  const bool fp32 = types.operands == ScalarType::kFloat32;
  return fp32 && allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace shardwise::cuda
