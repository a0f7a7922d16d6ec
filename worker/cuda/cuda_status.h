#ifndef SHARDWISE_WORKER_CUDA_CUDA_STATUS_H_
#define SHARDWISE_WORKER_CUDA_CUDA_STATUS_H_

// CUDA, cuBLAS and NCCL results as absl::Status: OK, or an error naming the call and the
// library's own name and text for the code. Out-of-memory is RESOURCE_EXHAUSTED, a
// driver or device fault INTERNAL, a lost peer of NCCL UNAVAILABLE.

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/status.h"

namespace shardwise::cuda {

absl::Status CudaStatus(cudaError_t error, const char* what);
absl::Status CublasStatus(cublasStatus_t status, const char* what);
absl::Status NcclStatus(ncclResult_t result, const char* what);

// cudaEventQuery that leaves no trace: cudaErrorNotReady ("still running", not an error)
// is also recorded as the thread's last error, which the next kernel launch's check
// (cudaGetLastError) would report as its own failure; it is cleared here.
cudaError_t QueryEvent(cudaEvent_t event);

}  // namespace shardwise::cuda

// Returns from the enclosing function when the CUDA call fails.
#define RETURN_IF_CUDA_ERROR(expr)                                        \
  do {                                                                    \
    const cudaError_t shardwise_cuda_error_ = (expr);                     \
    if (shardwise_cuda_error_ != cudaSuccess) {                           \
      return ::shardwise::cuda::CudaStatus(shardwise_cuda_error_, #expr); \
    }                                                                     \
  } while (false)

#endif  // SHARDWISE_WORKER_CUDA_CUDA_STATUS_H_
