#include "worker/cuda/blas_lt.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {
namespace {

// cuBLASLt's kernels for Hopper take up to 32 MiB of working space (NVIDIA's advice for
// cuBLAS on H100); allocated once per stream, outside the caching allocator, as cuBLAS's
// own workspace is.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The largest power of two (up to 256) that divides the address.
int Alignment(const void* pointer) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  if (address == 0) return 256;
  return static_cast<int>(std::min<uintptr_t>(256, address & (~address + 1)));
}

cublasLtEpilogue_t LtEpilogue(LinearEpilogue epilogue) {
  switch (epilogue) {
    case LinearEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case LinearEpilogue::kGeluAux:
      return CUBLASLT_EPILOGUE_GELU_AUX;
    case LinearEpilogue::kGeluAuxBias:
      return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case LinearEpilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool HasBias(LinearEpilogue e) {
  return e == LinearEpilogue::kBias || e == LinearEpilogue::kGeluAuxBias;
}
bool KeepsInput(LinearEpilogue e) {
  return e == LinearEpilogue::kGeluAux || e == LinearEpilogue::kGeluAuxBias;
}

// One call's descriptors, destroyed with it.
struct Descriptors {
  ~Descriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, d}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
    if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
  }
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
};

template <typename T>
absl::Status SetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                          const T& value) {
  return CublasStatus(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)),
                      "cublasLtMatmulDescSetAttribute");
}

template <typename T>
absl::Status SetPreference(cublasLtMatmulPreference_t preference,
                           cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  return CublasStatus(
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)),
      "cublasLtMatmulPreferenceSetAttribute");
}

// The epilogue's attributes: what it adds, and where it keeps GELU's input.
absl::Status DescribeEpilogue(const BlasLt::Linear& call, cublasLtMatmulDesc_t desc) {
  const uint32_t epilogue = LtEpilogue(call.epilogue);
  RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  if (HasBias(call.epilogue)) {
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias.data()));
    const int32_t bias_type = GemmDataType(call.bias.type());
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type));
  }
  if (KeepsInput(call.epilogue)) {
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, call.pre));
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, call.out));
    const int32_t pre_type = GemmDataType(call.types.output);
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, pre_type));
  }
  return absl::OkStatus();
}

// Row-major y[batch, out] = x W^T is column-major y^T[out, batch] = op_T(W) x^T, W held
// as W^T[in, out] and x as x^T[in, batch] (blas.cc's convention).
absl::Status Describe(const BlasLt::Linear& call, Descriptors& d) {
  ASSIGN_OR_RETURN(const cublasComputeType_t compute, GemmComputeType(call.types, call.allow_tf32));
  RETURN_IF_ERROR(CublasStatus(cublasLtMatmulDescCreate(&d.matmul, compute, CUDA_R_32F),
                               "cublasLtMatmulDescCreate"));
  const int32_t transpose = CUBLAS_OP_T;
  const int32_t none = CUBLAS_OP_N;
  RETURN_IF_ERROR(SetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, transpose));
  RETURN_IF_ERROR(SetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, none));
  RETURN_IF_ERROR(DescribeEpilogue(call, d.matmul));
  const cudaDataType_t operands = GemmDataType(call.types.operands);
  const cudaDataType_t output = GemmDataType(call.types.output);
  RETURN_IF_ERROR(
      CublasStatus(cublasLtMatrixLayoutCreate(&d.a, operands, call.in, call.out, call.in),
                   "cublasLtMatrixLayoutCreate"));
  RETURN_IF_ERROR(
      CublasStatus(cublasLtMatrixLayoutCreate(&d.b, operands, call.in, call.batch, call.in),
                   "cublasLtMatrixLayoutCreate"));
  return CublasStatus(cublasLtMatrixLayoutCreate(&d.d, output, call.out, call.batch, call.out),
                      "cublasLtMatrixLayoutCreate");
}

absl::Status DescribePreference(const BlasLt::Linear& call, Descriptors& d) {
  RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&d.preference),
                               "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kWorkspaceBytes;
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace));
  const uint32_t a = Alignment(call.w), b = Alignment(call.x), y = Alignment(call.y);
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a));
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b));
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, y));
  return SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, y);
}

}  // namespace

absl::StatusOr<std::unique_ptr<BlasLt>> BlasLt::Create(cudaStream_t stream) {
  cublasLtHandle_t handle = nullptr;
  RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&handle), "cublasLtCreate"));
  void* workspace = nullptr;
  const cudaError_t allocated = cudaMalloc(&workspace, kWorkspaceBytes);
  if (allocated != cudaSuccess) {
    cublasLtDestroy(handle);
    return CudaStatus(allocated, "cudaMalloc (cuBLASLt's workspace)");
  }
  return std::unique_ptr<BlasLt>(new BlasLt(handle, stream, workspace));
}

BlasLt::~BlasLt() {
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

BlasLt::PlanKey BlasLt::KeyOf(const Linear& call) {
  return {static_cast<int>(call.epilogue),
          static_cast<int>(call.types.operands),
          static_cast<int>(call.types.output),
          HasBias(call.epilogue) ? static_cast<int>(call.bias.type()) : -1,
          call.allow_tf32,
          call.batch,
          call.in,
          call.out,
          Alignment(call.x),
          Alignment(call.w),
          Alignment(call.y),
          KeepsInput(call.epilogue) ? Alignment(call.pre) : 0,
          HasBias(call.epilogue) ? Alignment(call.bias.data()) : 0};
}

absl::Status BlasLt::LinearForward(const Linear& call) {
  Descriptors d;
  RETURN_IF_ERROR(Describe(call, d));
  auto [it, added] = plans_.try_emplace(KeyOf(call));
  Plan& plan = it->second;
  if (added) {
    RETURN_IF_ERROR(DescribePreference(call, d));
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle_, d.matmul, d.a, d.b, d.d, d.d, d.preference, 1, &result, &found);
    if (status != CUBLAS_STATUS_SUCCESS && status != CUBLAS_STATUS_NOT_SUPPORTED) {
      plans_.erase(it);
      return CublasStatus(status, "cublasLtMatmulAlgoGetHeuristic");
    }
    plan.supported = status == CUBLAS_STATUS_SUCCESS && found > 0;
    plan.algo = result.algo;
  }
  if (!plan.supported) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt has no algorithm for a ", call.batch,
                                                 " x ", call.in, " x ", call.out,
                                                 " Linear with this epilogue"));
  }
  const float alpha = 1.0f, beta = 0.0f;
  return CublasStatus(
      cublasLtMatmul(handle_, d.matmul, &alpha, call.w, d.a, call.x, d.b, &beta, call.y, d.d,
                     call.y, d.d, &plan.algo, workspace_, kWorkspaceBytes, stream_),
      "cublasLtMatmul");
}

namespace {

// Device memory for the probe, freed with it.
struct ProbeBuffer {
  explicit ProbeBuffer(size_t floats) {
    status = CudaStatus(cudaMalloc(&data, floats * 4), "cudaMalloc");
  }
  ~ProbeBuffer() { cudaFree(data); }
  float* f32() const { return static_cast<float*>(data); }
  void* data = nullptr;
  absl::Status status;
};

}  // namespace

absl::StatusOr<GeluFormula> ProbeGeluEpilogue(BlasLt& lt, cudaStream_t stream) {
  // x: [-4, 4) in steps of 1/16, 16 rows of 8; W the identity; b multiples of 1/64. Every
  // sum is exact in FP32, so GELU's inputs are known to the bit.
  constexpr int64_t kRows = 16, kDim = 8;
  std::vector<float> x(kRows * kDim), w(kDim * kDim, 0.0f), b(kDim);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -4.0f + static_cast<float>(i) / 16.0f;
  for (int64_t i = 0; i < kDim; ++i) {
    w[i * kDim + i] = 1.0f;
    b[i] = static_cast<float>(i - kDim / 2) / 64.0f;
  }
  ProbeBuffer dx(x.size()), dw(w.size()), db(b.size()), dy(x.size()), dpre(x.size());
  for (const ProbeBuffer* buffer : {&dx, &dw, &db, &dy, &dpre}) RETURN_IF_ERROR(buffer->status);
  // On the probe's stream (from pageable memory, a copy may return before it landed).
  for (auto [to, from] : {std::pair(&dx, &x), std::pair(&dw, &w), std::pair(&db, &b)}) {
    RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(to->data, from->data(), from->size() * 4, cudaMemcpyHostToDevice, stream));
  }
  BlasLt::Linear call;
  call.x = dx.data;
  call.w = dw.data;
  call.bias = ConstTensorRef(db.f32());
  call.batch = kRows;
  call.in = call.out = kDim;
  call.y = dy.data;
  call.pre = dpre.data;
  call.epilogue = LinearEpilogue::kGeluAuxBias;
  const absl::Status ran = lt.LinearForward(call);
  if (absl::IsUnimplemented(ran)) return GeluFormula::kUnknown;
  RETURN_IF_ERROR(ran);
  std::vector<float> y(x.size()), pre(x.size());
  RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(y.data(), dy.data, y.size() * 4, cudaMemcpyDeviceToHost, stream));
  RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(pre.data(), dpre.data, pre.size() * 4, cudaMemcpyDeviceToHost, stream));
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < x.size(); ++i) {
    if (pre[i] != x[i] + b[i % kDim]) return GeluFormula::kUnknown;
  }
  return ClassifyGelu(pre, y);
}

}  // namespace shardwise::cuda
