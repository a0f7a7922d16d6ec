#ifndef SHARDWISE_WORKER_CUDA_BLAS_LT_H_
#define SHARDWISE_WORKER_CUDA_BLAS_LT_H_

// The Linear forward through cuBLASLt, whose epilogues finish the GEMM in its own kernel
// (gemm_epilogue.h): the bias added to the FP32 sums before the one rounding to y's type
// (without it the bias is broadcast into y and the GEMM adds onto it: a pass over y more),
// and GELU applied, its input kept for the backward (one GEMM instead of a GEMM and an
// activation kernel). Row-major with PyTorch's conventions, as blas.h. Each shape, type
// and alignment's algorithm is chosen once (cuBLASLt's heuristic) and kept. Where cuBLASLt
// has none, LinearForward answers UNIMPLEMENTED and the caller runs the operations one by
// one.
//
// Thread-safety: none; one per stream (Blas owns one).

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/cuda/gemm_epilogue.h"
#include "worker/cuda/gemm_types.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda {

class BlasLt {
 public:
  static absl::StatusOr<std::unique_ptr<BlasLt>> Create(cudaStream_t stream);
  ~BlasLt();
  BlasLt(const BlasLt&) = delete;
  BlasLt& operator=(const BlasLt&) = delete;

  // y[batch, out] = epilogue(x[batch, in] W[out, in]^T, b[out]); the GELU epilogues also
  // write `pre` (of y's type), GELU's input. The bias is FP32 or y's type.
  struct Linear {
    const void* x = nullptr;
    const void* w = nullptr;
    ConstTensorRef bias;
    int64_t batch = 0, in = 0, out = 0;
    void* y = nullptr;
    void* pre = nullptr;
    LinearEpilogue epilogue = LinearEpilogue::kNone;
    GemmTypes types;
    bool allow_tf32 = false;
  };
  absl::Status LinearForward(const Linear& call);

 private:
  // What an algorithm is chosen for: the call's shape, types, epilogue and the alignment
  // of each pointer (cuBLASLt's kernels rely on it).
  using PlanKey =
      std::tuple<int, int, int, int, bool, int64_t, int64_t, int64_t, int, int, int, int, int>;
  struct Plan {
    bool supported = false;
    cublasLtMatmulAlgo_t algo;
  };

  BlasLt(cublasLtHandle_t handle, cudaStream_t stream, void* workspace)
      : handle_(handle), stream_(stream), workspace_(workspace) {}
  static PlanKey KeyOf(const Linear& call);

  cublasLtHandle_t handle_;
  cudaStream_t stream_;
  void* workspace_;
  std::map<PlanKey, Plan> plans_;
};

// Which GELU formula cuBLASLt's GELU epilogue computes, measured on `stream`: an FP32
// GEMM whose products are exact (an identity weight) over inputs in [-4, 4] and a bias,
// its kept input checked against the exact sums (a wrong layout or bias is kUnknown, not
// a formula) and its output judged by ClassifyGelu. Waits for the stream.
absl::StatusOr<GeluFormula> ProbeGeluEpilogue(BlasLt& lt, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_BLAS_LT_H_
