#include "worker/cuda/blas_lt.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda/cuda_status.h"

namespace shardwise::cuda {

// A plan's descriptors, destroyed with it.
struct BlasLt::Descriptors {
  Descriptors() = default;
  ~Descriptors() {
    if (preference != nullptr) cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, d}) {
      if (layout != nullptr) cublasLtMatrixLayoutDestroy(layout);
    }
    if (matmul != nullptr) cublasLtMatmulDescDestroy(matmul);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
};

BlasLt::Plan::Plan() = default;
BlasLt::Plan::Plan(Plan&&) noexcept = default;
BlasLt::Plan::~Plan() = default;

namespace {

using Descriptors = BlasLt::Descriptors;

// cuBLASLt's kernels for Hopper take up to 32 MiB of working space (NVIDIA's advice for
// cuBLAS on H100); allocated once per stream, outside the caching allocator, as cuBLAS's
// own workspace is.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// The least alignment of a bias a fused epilogue is given (BlasLt::Run).
constexpr int kBiasAlignment = 16;

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
    case LinearEpilogue::kDGelu:
      return CUBLASLT_EPILOGUE_DGELU;
    case LinearEpilogue::kNone:
      break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool HasBias(LinearEpilogue e) {
  return e == LinearEpilogue::kBias || e == LinearEpilogue::kGeluAuxBias;
}
// Whether the call's bias is stored in another type than its output (cuBLASLt's default
// bias type): a type cuBLASLt may refuse only at launch.
bool MixedBias(const BlasLt::Matmul& call) {
  return HasBias(call.epilogue) && call.bias.type() != call.types.output;
}
// Whether the epilogue writes or reads GELU's input.
bool UsesAux(LinearEpilogue e) {
  return e == LinearEpilogue::kGeluAux || e == LinearEpilogue::kGeluAuxBias ||
         e == LinearEpilogue::kDGelu;
}

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

// The epilogue's attributes but its pointers: what it adds, and how GELU's input is laid
// out.
absl::Status DescribeEpilogue(const BlasLt::Matmul& call, cublasLtMatmulDesc_t desc) {
  const uint32_t epilogue = LtEpilogue(call.epilogue);
  RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue));
  // The bias's and the kept input's types are left at cuBLASLt's default (D's type) unless
  // they differ: cuBLASLt documents that a type it does not take there fails the matmul
  // itself, past the heuristic (Launch takes that as a refusal).
  if (MixedBias(call)) {
    const int32_t bias_type = GemmDataType(call.bias.type());
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type));
  }
  if (UsesAux(call.epilogue)) {
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, call.ldd));
  }
  return absl::OkStatus();
}

// The epilogue's pointers, this call's: set on the plan's descriptor before each launch
// (their alignments are in the plan's key).
absl::Status PointEpilogue(const BlasLt::Matmul& call, cublasLtMatmulDesc_t desc) {
  if (HasBias(call.epilogue)) {
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, call.bias.data()));
  }
  if (UsesAux(call.epilogue)) {
    RETURN_IF_ERROR(SetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, call.aux));
  }
  return absl::OkStatus();
}

// An epilogue's attribute cuBLASLt does not take (an epilogue or a bias type this library
// does not know: INVALID_VALUE or NOT_SUPPORTED, mapped to INVALID_ARGUMENT) as
// UNIMPLEMENTED, as a call it has no algorithm for is: the caller runs the operations.
absl::Status EpilogueRefusal(const absl::Status& status) {
  if (absl::IsInvalidArgument(status)) return absl::UnimplementedError(status.message());
  return status;
}

absl::Status Describe(const BlasLt::Matmul& call, Descriptors& d) {
  ASSIGN_OR_RETURN(const cublasComputeType_t compute, GemmComputeType(call.types, call.allow_tf32));
  RETURN_IF_ERROR(CublasStatus(cublasLtMatmulDescCreate(&d.matmul, compute, CUDA_R_32F),
                               "cublasLtMatmulDescCreate"));
  const int32_t op_a = call.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int32_t op_b = CUBLAS_OP_N;
  RETURN_IF_ERROR(SetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, op_a));
  RETURN_IF_ERROR(SetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, op_b));
  RETURN_IF_ERROR(EpilogueRefusal(DescribeEpilogue(call, d.matmul)));
  const cudaDataType_t operands = GemmDataType(call.types.operands);
  // A as stored: [k, m] when transposed, else [m, k].
  const uint64_t a_rows = call.transpose_a ? call.k : call.m;
  const uint64_t a_cols = call.transpose_a ? call.m : call.k;
  RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&d.a, operands, a_rows, a_cols, call.lda),
                               "cublasLtMatrixLayoutCreate"));
  RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&d.b, operands, call.k, call.n, call.ldb),
                               "cublasLtMatrixLayoutCreate"));
  return CublasStatus(
      cublasLtMatrixLayoutCreate(&d.d, GemmDataType(call.types.output), call.m, call.n, call.ldd),
      "cublasLtMatrixLayoutCreate");
}

absl::Status DescribePreference(const BlasLt::Matmul& call, Descriptors& d) {
  RETURN_IF_ERROR(CublasStatus(cublasLtMatmulPreferenceCreate(&d.preference),
                               "cublasLtMatmulPreferenceCreate"));
  const uint64_t workspace = kWorkspaceBytes;
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace));
  const uint32_t a = Alignment(call.a), b = Alignment(call.b), out = Alignment(call.d);
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, a));
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, b));
  RETURN_IF_ERROR(SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, out));
  return SetPreference(d.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, out);
}

// cuBLASLt's best algorithm for the described call; UNIMPLEMENTED where cuBLASLt has none
// for it (no algorithm, or a description it does not support: a fact of the shape and
// the GPU, kept); any other failure as itself (not kept: it may pass).
absl::StatusOr<cublasLtMatmulAlgo_t> ChooseAlgorithm(cublasLtHandle_t handle,
                                                     const BlasLt::Matmul& call, Descriptors& d) {
  RETURN_IF_ERROR(DescribePreference(call, d));
  cublasLtMatmulHeuristicResult_t result = {};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, d.matmul, d.a, d.b, d.d, d.d,
                                                               d.preference, 1, &result, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || status == CUBLAS_STATUS_INVALID_VALUE) {
    return absl::UnimplementedError(
        CublasStatus(status, "cublasLtMatmulAlgoGetHeuristic").message());
  }
  RETURN_IF_ERROR(CublasStatus(status, "cublasLtMatmulAlgoGetHeuristic"));
  if (found < 1) return absl::UnimplementedError("no algorithm");
  // An entry whose own state is not a success holds no algorithm (cublasLt.h).
  if (result.state != CUBLAS_STATUS_SUCCESS) {
    return absl::UnimplementedError(CublasStatus(result.state, "the heuristic's result").message());
  }
  return result.algo;
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

BlasLt::PlanKey BlasLt::KeyOf(const Matmul& call) {
  return {static_cast<int>(call.epilogue),
          static_cast<int>(call.types.operands),
          static_cast<int>(call.types.output),
          HasBias(call.epilogue) ? static_cast<int>(call.bias.type()) : -1,
          call.allow_tf32,
          call.transpose_a,
          call.m,
          call.n,
          call.k,
          call.lda,
          call.ldb,
          call.ldd,
          Alignment(call.a),
          Alignment(call.b),
          Alignment(call.d),
          UsesAux(call.epilogue) ? Alignment(call.aux) : 0,
          HasBias(call.epilogue) ? Alignment(call.bias.data()) : 0};
}

namespace {

// cuBLASLt may choose a kernel that loads the bias 16 bytes at a time and faults on one
// less aligned (a misaligned address: a sticky error that ends the CUDA context), and a
// bias is a view into a flat parameter buffer at whatever offset its parameters put it:
// such a call is not planned (UNIMPLEMENTED, so it runs unfused, said once per shape as
// any other). OK (no algorithm yet) otherwise.
absl::StatusOr<cublasLtMatmulAlgo_t> MisalignedBias(const BlasLt::Matmul& call) {
  if (!HasBias(call.epilogue) || Alignment(call.bias.data()) >= kBiasAlignment) {
    return cublasLtMatmulAlgo_t{};
  }
  return absl::UnimplementedError(
      absl::StrCat("a bias at an address aligned to ", Alignment(call.bias.data()),
                   " bytes (cuBLASLt's bias epilogues may need ", kBiasAlignment, ")"));
}

// The described call's algorithm; UNIMPLEMENTED where the epilogue's attributes are
// refused (EpilogueRefusal).
absl::StatusOr<cublasLtMatmulAlgo_t> DescribeAndChoose(cublasLtHandle_t handle,
                                                       const BlasLt::Matmul& call, Descriptors& d) {
  RETURN_IF_ERROR(Describe(call, d));
  // The heuristic sees the first call's pointers too, as it did when every call was
  // described whole.
  RETURN_IF_ERROR(EpilogueRefusal(PointEpilogue(call, d.matmul)));
  return ChooseAlgorithm(handle, call, d);
}

}  // namespace

absl::StatusOr<BlasLt::Plan*> BlasLt::PlanFor(const Matmul& call) {
  const PlanKey key = KeyOf(call);
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  auto described = std::make_unique<Descriptors>();
  absl::StatusOr<cublasLtMatmulAlgo_t> algo = MisalignedBias(call);
  if (algo.ok()) algo = DescribeAndChoose(handle_, call, *described);
  if (!algo.ok() && !absl::IsUnimplemented(algo.status())) return algo.status();
  Plan plan;
  plan.supported = algo.ok();
  if (algo.ok()) {
    plan.algo = *algo;
    plan.described = std::move(described);
  } else {
    // Where cuBLASLt cannot plan the call, the caller's unfused operations run, as they
    // did on every GPU before: not a failed job, but slower, so a warning, once per shape.
    plan.reason = std::string(algo.status().message());
    LogWarning(LogContext(),
               absl::StrCat("cuBLASLt cannot run a ", call.m, " x ", call.n, " x ", call.k,
                            " GEMM with epilogue ", static_cast<int>(call.epilogue), " (",
                            plan.reason, "): its operations run one by one"));
  }
  return &plans_.emplace(key, std::move(plan)).first->second;
}

absl::Status BlasLt::Run(const Matmul& call) {
  ASSIGN_OR_RETURN(Plan* const plan, PlanFor(call));
  if (!plan->supported) {
    return absl::UnimplementedError(absl::StrCat("cuBLASLt cannot run a ", call.m, " x ", call.n,
                                                 " x ", call.k,
                                                 " GEMM with this epilogue: ", plan->reason));
  }
  return Launch(call, *plan);
}

absl::Status BlasLt::Launch(const Matmul& call, Plan& plan) {
  const Descriptors& d = *plan.described;
  RETURN_IF_ERROR(PointEpilogue(call, d.matmul));
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t ran =
      cublasLtMatmul(handle_, d.matmul, &alpha, call.a, d.a, call.b, d.b, &beta, call.d, d.d,
                     call.d, d.d, &plan.algo, workspace_, kWorkspaceBytes, stream_);
  // A description the heuristic took may still fail the launch: a bias type other than
  // D's, an epilogue's kept input at a leading dimension or alignment its kernel does not
  // take, as not supported or as an invalid value (cublasLt.h names no code for these).
  // After a launch with the plan has run, an invalid value is this call's own fault.
  if (ran == CUBLAS_STATUS_NOT_SUPPORTED ||
      (!plan.launched && ran == CUBLAS_STATUS_INVALID_VALUE)) {
    // Refused at launch (nothing ran): this shape runs unfused from now on, which rounds
    // GELU's input first: said as a warning.
    plan.supported = false;
    plan.described.reset();
    plan.reason = std::string(CublasStatus(ran, "cublasLtMatmul").message());
    // A launch error cuBLASLt left on the thread is this refusal's: taken here, or the
    // unfused kernels' launch check would report it as theirs (a sticky fault stays the
    // context's and fails the next call anyway).
    const cudaError_t left = cudaGetLastError();
    if (left != cudaSuccess) absl::StrAppend(&plan.reason, "; CUDA: ", cudaGetErrorString(left));
    LogWarning(LogContext(), absl::StrCat("cuBLASLt refused a planned ", call.m, " x ", call.n,
                                          " x ", call.k, " GEMM at launch (", plan.reason,
                                          "): its operations run one by one from now on"));
    return absl::UnimplementedError(plan.reason);
  }
  if (ran == CUBLAS_STATUS_SUCCESS) plan.launched = true;
  return CublasStatus(ran, "cublasLtMatmul");
}

namespace {

// Device memory for the probe, freed with it.
struct ProbeBuffer {
  explicit ProbeBuffer(size_t floats) {
    status = CudaStatus(cudaMalloc(&data, floats * sizeof(float)), "cudaMalloc (the GELU probe)");
  }
  ~ProbeBuffer() { cudaFree(data); }
  float* f32() const { return static_cast<float*>(data); }
  void* data = nullptr;
  absl::Status status;
};

// The probe's shapes: 64 rows of 8, GELU's inputs [-4, 4) in steps of 1/64 (enough points
// for FitGelu's share to average a fast tanh's error out) plus a bias in
// multiples of 1/64: every sum exact in FP32, so the epilogue's inputs are known to the bit.
constexpr int64_t kProbeRows = 64, kProbeDim = 8;

// Row-major: x W^T + b with W the identity is x + b; dy W with dy all ones is W's column
// sums, ones. Both column-major as blas.cc lays them out.
BlasLt::Matmul ProbeMatmul(bool forward, const ProbeBuffer& w, const ProbeBuffer& rows) {
  BlasLt::Matmul call;
  call.transpose_a = forward;
  call.m = call.k = call.lda = call.ldb = call.ldd = kProbeDim;
  call.n = kProbeRows;
  call.a = w.data;
  call.b = rows.data;
  return call;
}

absl::Status Upload(const ProbeBuffer& to, const std::vector<float>& from, cudaStream_t stream) {
  RETURN_IF_ERROR(to.status);
  // On the probe's stream (from pageable memory, a copy may return before it landed).
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(to.data, from.data(), from.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Download(const ProbeBuffer& from, size_t n,
                                            cudaStream_t stream) {
  std::vector<float> host(n);
  RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(host.data(), from.data, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  return host;
}

// Runs `call` and reads its output `d` (n floats) back; where cuBLASLt cannot run it,
// nullopt and why in *refused.
absl::StatusOr<std::optional<std::vector<float>>> RunAndDownload(BlasLt& lt,
                                                                 const BlasLt::Matmul& call,
                                                                 const ProbeBuffer& d, size_t n,
                                                                 cudaStream_t stream,
                                                                 std::string* refused) {
  const absl::Status ran = lt.Run(call);
  if (absl::IsUnimplemented(ran)) {
    *refused = absl::StrCat("cuBLASLt refused the FP32 probe (", ran.message(), ")");
    return std::nullopt;
  }
  RETURN_IF_ERROR(ran);
  return Download(d, n, stream);
}

// Where the kept input `pre` is not x + b to the bit (a wrong layout or bias: the
// outputs would not be the formula's at known inputs), which element differs and how.
std::optional<std::string> WrongKeptInput(const std::vector<float>& pre,
                                          const std::vector<float>& x,
                                          const std::vector<float>& b) {
  for (size_t i = 0; i < pre.size(); ++i) {
    const float want = x[i] + b[i % kProbeDim];
    if (pre[i] != want) {
      return absl::StrCat("GELU_AUX_BIAS kept ", pre[i], " at element ", i, " for x + b = ", want);
    }
  }
  return std::nullopt;
}

}  // namespace

namespace {

// The probe's values on the host and the device.
struct ProbeValues {
  static constexpr size_t n = kProbeRows * kProbeDim;
  ProbeValues() : x(n), w(kProbeDim * kProbeDim, 0.0f), b(kProbeDim), ones(n, 1.0f) {
    for (size_t i = 0; i < n; ++i) x[i] = -4.0f + static_cast<float>(i) / 64.0f;
    for (int64_t i = 0; i < kProbeDim; ++i) {
      w[i * kProbeDim + i] = 1.0f;
      b[i] = static_cast<float>(i - kProbeDim / 2) / 64.0f;
    }
  }
  absl::Status UploadAll(cudaStream_t stream) {
    for (const ProbeBuffer* buffer : {&dy, &dpre, &dgrad}) RETURN_IF_ERROR(buffer->status);
    RETURN_IF_ERROR(Upload(dx, x, stream));
    RETURN_IF_ERROR(Upload(dw, w, stream));
    RETURN_IF_ERROR(Upload(db, b, stream));
    return Upload(dones, ones, stream);
  }
  std::vector<float> x, w, b, ones;
  ProbeBuffer dx{n}, dw{kProbeDim * kProbeDim}, db{kProbeDim}, dones{n}, dy{n}, dpre{n}, dgrad{n};
};

// GELU_AUX_BIAS's fit, its kept input into *pre.
absl::StatusOr<GeluFit> ProbeValue(BlasLt& lt, const ProbeValues& v, cudaStream_t stream,
                                   std::vector<float>* pre) {
  GeluFit fit;
  BlasLt::Matmul forward = ProbeMatmul(true, v.dw, v.dx);
  forward.epilogue = LinearEpilogue::kGeluAuxBias;
  forward.bias = ConstTensorRef(v.db.f32());
  forward.d = v.dy.data;
  forward.aux = v.dpre.data;
  ASSIGN_OR_RETURN(const std::optional<std::vector<float>> y,
                   RunAndDownload(lt, forward, v.dy, ProbeValues::n, stream, &fit.unmeasured));
  if (!y.has_value()) return fit;
  ASSIGN_OR_RETURN(*pre, Download(v.dpre, ProbeValues::n, stream));
  if (std::optional<std::string> wrong = WrongKeptInput(*pre, v.x, v.b)) {
    fit.unmeasured = *std::move(wrong);
    return fit;
  }
  return FitGelu(GeluPart::kValue, *pre, *y);
}

// DGELU's fit at the kept input `pre` (on the device in v.dpre).
absl::StatusOr<GeluFit> ProbeDerivative(BlasLt& lt, const ProbeValues& v, cudaStream_t stream,
                                        const std::vector<float>& pre) {
  GeluFit fit;
  BlasLt::Matmul backward = ProbeMatmul(false, v.dw, v.dones);
  backward.epilogue = LinearEpilogue::kDGelu;
  backward.d = v.dgrad.data;
  backward.aux = v.dpre.data;
  ASSIGN_OR_RETURN(const std::optional<std::vector<float>> grad,
                   RunAndDownload(lt, backward, v.dgrad, ProbeValues::n, stream, &fit.unmeasured));
  if (!grad.has_value()) return fit;
  return FitGelu(GeluPart::kDerivative, pre, *grad);
}

}  // namespace

absl::StatusOr<GeluEpilogueFormulas> ProbeGeluEpilogues(BlasLt& lt, cudaStream_t stream) {
  ProbeValues values;
  RETURN_IF_ERROR(values.UploadAll(stream));
  GeluEpilogueFormulas formulas;
  std::vector<float> pre;
  ASSIGN_OR_RETURN(formulas.value, ProbeValue(lt, values, stream, &pre));
  if (!formulas.value.unmeasured.empty()) {
    formulas.derivative.unmeasured = "not probed: GELU_AUX_BIAS measured nothing";
    return formulas;
  }
  ASSIGN_OR_RETURN(formulas.derivative, ProbeDerivative(lt, values, stream, pre));
  return formulas;
}

}  // namespace shardwise::cuda
