#ifndef SHARDWISE_WORKER_CUDA_BLAS_LT_H_
#define SHARDWISE_WORKER_CUDA_BLAS_LT_H_

// A Linear's GEMMs through cuBLASLt, whose epilogues finish the GEMM in its own kernel
// (gemm_epilogue.h): the forward's bias added to the FP32 sums before the one rounding to
// y's type (without it the bias is broadcast into y and the GEMM adds onto it: a pass over
// y more), GELU applied with its input kept for the backward, and in the backward the
// input gradient multiplied by GELU's derivative at that kept input (one GEMM each instead
// of a GEMM and an activation kernel). Each shape, type and alignment's algorithm is
// chosen once (cuBLASLt's heuristic) and kept with its descriptors, so a call after the
// first only points them at its bias and kept input and launches. Where cuBLASLt has none (or
// refuses the description), Run answers UNIMPLEMENTED (nothing written; logged once per shape) and
// the caller runs the operations one by one.
//
// Thread-safety: none; one per stream (Blas owns one).

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
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

  // Column-major (cuBLAS's convention) D[m, n] = epilogue(op(A)[m, k] B[k, n]), op(A)
  // = A^T when `transpose_a` (A stored [k, m]) else A (stored [m, k]); B stored [k, n].
  // The bias has m elements, FP32 or D's type; `aux`, laid out as D (leading dimension
  // ldd) and of D's type, is GELU's input: written by the GELU epilogues, read by kDGelu.
  struct Matmul {
    bool transpose_a = false;
    int64_t m = 0, n = 0, k = 0;
    const void* a = nullptr;
    int64_t lda = 0;
    const void* b = nullptr;
    int64_t ldb = 0;
    void* d = nullptr;
    int64_t ldd = 0;
    LinearEpilogue epilogue = LinearEpilogue::kNone;
    ConstTensorRef bias;
    void* aux = nullptr;
    GemmTypes types;
    bool allow_tf32 = false;
  };
  absl::Status Run(const Matmul& call);

  // A planned call's cuBLASLt descriptors but its pointers; opaque (blas_lt.cc).
  struct Descriptors;

 private:
  // What an algorithm is chosen for: the call's shape, types, epilogue and the alignment
  // of each pointer (cuBLASLt's kernels rely on it).
  using PlanKey = std::tuple<int, int, int, int, bool, bool, int64_t, int64_t, int64_t, int64_t,
                             int64_t, int64_t, int, int, int, int, int>;
  struct Plan {
    Plan();
    Plan(Plan&&) noexcept;
    ~Plan();
    bool supported = false;
    cublasLtMatmulAlgo_t algo;
    std::unique_ptr<Descriptors> described;  // where supported
    std::string reason;                      // why not, where not supported
    // Whether a launch with it has run: an invalid value after one is that call's fault,
    // not a refusal of the plan.
    bool launched = false;
  };

  BlasLt(cublasLtHandle_t handle, cudaStream_t stream, void* workspace)
      : handle_(handle), stream_(stream), workspace_(workspace) {}
  static PlanKey KeyOf(const Matmul& call);
  // The call's plan, made on its key's first call; an error (not kept) where describing
  // it or asking the heuristic fails other than by cuBLASLt having nothing for it or not
  // taking its description.
  absl::StatusOr<Plan*> PlanFor(const Matmul& call);
  // The launch with `plan`; UNIMPLEMENTED, and the plan unsupported from then on, where
  // cuBLASLt refuses it at launch (NOT_SUPPORTED, or INVALID_VALUE at the plan's first
  // launch: a description the heuristic took that the epilogue's kernel does not).
  absl::Status Launch(const Matmul& call, Plan& plan);

  cublasLtHandle_t handle_;
  cudaStream_t stream_;
  void* workspace_;
  std::map<PlanKey, Plan> plans_;
};

// Which GELU formulas cuBLASLt's epilogues compute, measured on `stream`: FP32 GEMMs whose
// products are exact (an identity weight) at inputs in [-4, 4]: GELU_AUX_BIAS, its kept
// input checked against the exact sums (a wrong layout or bias is kUnknown, not a
// formula), and DGELU of a gradient of ones, which leaves GELU's derivative; each judged
// by FitGelu, with the reason where nothing was measured. Waits for the stream.
struct GeluEpilogueFormulas {
  GeluFit value;       // GELU_AUX_BIAS's
  GeluFit derivative;  // DGELU's
};
absl::StatusOr<GeluEpilogueFormulas> ProbeGeluEpilogues(BlasLt& lt, cudaStream_t stream);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_BLAS_LT_H_
