#include "worker/cuda/cuda_device.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "contracts/cuda_attention_rows.h"
#include "worker/compute/float_views.h"
#include "worker/cuda/attention.h"
#include "worker/cuda/cuda_status.h"
#include "worker/cuda/fused_attention.h"
#include "worker/cuda/gemm_epilogue.h"
#include "worker/cuda/kernels.h"
#include "worker/cuda/llama_kernels.h"
#include "worker/cuda/transformer_kernels.h"
#include "worker/cuda/typed_operand.h"

namespace shardwise::cuda {
namespace {

// The stream each thread chose, per device (a thread serves one device at a time). The
// device is named by its id, not its address: a device destroyed and a new one made at
// the same address must not inherit the old one's stream.
thread_local uint64_t bound_device = 0;
thread_local cudaStream_t bound_stream = nullptr;

uint64_t NextDeviceId() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

// A fence is a recorded event of the device's pool (event_pool.h), which gets it back when
// the last holder drops the fence.
class EventFence final : public Device::Fence {
 public:
  explicit EventFence(std::shared_ptr<Event> event) : event(std::move(event)) {}
  std::shared_ptr<Event> event;
};

Activation KernelActivation(v1::Activation act) {
  switch (act) {
    case v1::GELU:
      return Activation::kGelu;
    case v1::GELU_TANH:
      return Activation::kGeluTanh;
    case v1::SILU:
      return Activation::kSilu;
    default:
      return Activation::kRelu;
  }
}

// The first operand whose values could not be made (OK if none): a GEMM must not read
// them, a wrongly typed or unwritten copy.
absl::Status FirstError(std::initializer_list<const TypedOperand*> operands) {
  for (const TypedOperand* operand : operands) RETURN_IF_ERROR(operand->status());
  return absl::OkStatus();
}

}  // namespace

bool SynchronousModeRequested() {
  const char* value = std::getenv(kSynchronousModeVariable);
  return value != nullptr && std::string_view(value) == "1";
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(const CudaDeviceOptions& options) {
  RETURN_IF_CUDA_ERROR(SetThreadGpu(options.gpu));
  std::unique_ptr<CudaDevice> device(new CudaDevice(options));
  ASSIGN_OR_RETURN(FsdpStreams streams, FsdpStreams::Create());
  device->compute_ = std::move(streams.compute);
  device->unshard_ = std::move(streams.unshard);
  device->post_backward_ = std::move(streams.post_backward);
  device->all_reduce_ = std::move(streams.all_reduce);
  CudaDevice* raw = device.get();
  device->allocator_ = std::make_unique<CudaCachingAllocator>(
      [raw] { return raw->stream(); }, [raw](const absl::Status& status) { raw->Check(status); });
  ASSIGN_OR_RETURN(device->blas_, Blas::Create(device->compute_.get()));
  device->blas_->set_allow_tf32(options.allow_tf32);
  ASSIGN_OR_RETURN(device->uploads_, PinnedUploads::Create());
  ASSIGN_OR_RETURN(device->cudnn_facts_, LoadedCudnnFacts(options.gpu));
  device->clock_ = std::make_unique<CudaStreamClock>(options.gpu, [raw] {
    const cudaStream_t stream = raw->stream();
    return std::make_pair(stream, raw->StreamLane(stream));
  });
  bound_device = raw->id_;
  bound_stream = raw->compute_.get();
  // Before any collective exists: the probe allocates and frees with cudaMalloc/cudaFree,
  // and cudaFree waits for the whole GPU, which during a step could wait on an all-gather
  // whose peers wait for this rank.
  device->EpilogueGelu();
  return device;
}

CudaDevice::CudaDevice(const CudaDeviceOptions& options) : options_(options), id_(NextDeviceId()) {}

CudaDevice::~CudaDevice() {
  // The destroying thread may never have used this GPU, or be bound to another device:
  // the members are destroyed with this GPU current, and on_gpu_while_destroyed_,
  // destroyed last, gives the thread its own GPU back.
  on_gpu_while_destroyed_.emplace(options_.gpu);
  cudaDeviceSynchronize();
  // The allocator's blocks go back to the driver before the streams they belong to.
  allocator_.reset();
  if (bound_device == id_) bound_device = 0;
}

cudaStream_t CudaDevice::stream() {
  if (bound_device != id_) {
    SetThreadGpu(options_.gpu);
    bound_device = id_;
    bound_stream = compute_.get();
  }
  return bound_stream;
}

int CudaDevice::StreamLane(cudaStream_t stream) const {
  if (stream == unshard_.get()) return kUnshardStreamLane;
  if (stream == post_backward_.get()) return kPostBackwardStreamLane;
  if (stream == all_reduce_.get()) return kAllReduceStreamLane;
  return kComputeStreamLane;
}

void CudaDevice::UseCommunicationStream(CommLane lane) {
  stream();  // binds the thread to this device
  bound_stream = communication_stream(lane);
}

void CudaDevice::Check(cudaError_t error, const char* what) {
  Check(error == cudaSuccess ? absl::OkStatus() : CudaStatus(error, what));
}

absl::Status CudaDevice::OnComputeStream(const char* what) {
  if (stream() == compute_.get()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what,
                   " was issued from a thread that is not computing on the compute stream (only "
                   "the training thread runs layers); it was not run"));
}

absl::Status CudaDevice::WithComputeBlas(const std::function<absl::Status(Blas&)>& gemm) {
  RETURN_IF_ERROR(OnComputeStream("a GEMM"));
  return gemm(*blas_);
}

void CudaDevice::Check(const absl::Status& status) {
  if (!status.ok()) {
    KeepFirstError(status);
  } else if (options_.synchronous) {
    // The caller's stream only: a device-wide wait on a thread while another thread's
    // collective is in flight could wait for a peer rank that waits for this one.
    const cudaError_t synchronized = cudaStreamSynchronize(stream());
    if (synchronized != cudaSuccess) {
      KeepFirstError(CudaStatus(synchronized, "cudaStreamSynchronize (synchronous mode)"));
    }
  }
}

void CudaDevice::KeepFirstError(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = status;
}

absl::Status CudaDevice::status() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

std::shared_ptr<Device::Fence> CudaDevice::RecordFence() {
  const cudaStream_t recording = stream();  // binds this thread to the GPU: the event is its
  absl::StatusOr<std::shared_ptr<Event>> event = fence_events_.Acquire();
  absl::Status recorded = event.status();
  if (recorded.ok()) recorded = (*event)->Record(recording);
  if (!recorded.ok()) {
    // Without an event (or with a pooled one still marking its last borrower's point) a
    // wait would order nothing: the host waits for the stream instead, after which there
    // is nothing left to wait for (a null fence has passed).
    Check(recorded);
    Check(cudaStreamSynchronize(recording), "cudaStreamSynchronize (an unrecorded fence)");
    return nullptr;
  }
  return std::make_shared<EventFence>(std::move(*event));
}

void CudaDevice::WaitForFence(const Fence* fence) {
  if (fence == nullptr) return;
  const Event& event = *static_cast<const EventFence*>(fence)->event;
  Check(cudaStreamWaitEvent(stream(), event.get(), 0), "cudaStreamWaitEvent");
}

absl::Status CudaDevice::WaitForFenceOnHost(const Fence* fence) {
  if (fence != nullptr) {
    Check(cudaEventSynchronize(static_cast<const EventFence*>(fence)->event->get()),
          "cudaEventSynchronize");
  }
  return status();
}

bool CudaDevice::FencePassed(const Fence* fence) {
  if (fence == nullptr) return true;
  const cudaError_t queried = QueryEvent(static_cast<const EventFence*>(fence)->event->get());
  if (queried == cudaErrorNotReady) return false;
  Check(queried, "cudaEventQuery");
  return true;
}

absl::Status CudaDevice::Synchronize() {
  Check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
  return status();
}

// Through pinned staging (pinned_uploads.h): from pageable memory the copy could make the
// host wait for the stream.
void CudaDevice::CopyFromHost(void* dst, const void* host_src, size_t bytes) {
  Check(uploads_->Upload(dst, host_src, bytes, stream()));
}

absl::Status CudaDevice::Fetch(void* host_dst, const void* src, size_t bytes) {
  if (bytes > 0) {
    Check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (to host)");
  }
  return Synchronize();
}

absl::Status CudaDevice::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  return Fetch(host_dst, src, bytes);
}

void CudaDevice::Copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "cudaMemcpyAsync");
}

void CudaDevice::Zero(void* dst, size_t bytes) {
  if (bytes == 0) return;
  Check(cudaMemsetAsync(dst, 0, bytes, stream()), "cudaMemsetAsync");
}

void CudaDevice::Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) {
  Check(cuda::Narrow(type, in, out, n, stream()), "Narrow");
}

void CudaDevice::Widen(ScalarType type, const uint16_t* in, float* out, size_t n) {
  Check(cuda::Widen(type, in, out, n, stream()), "Widen");
}

void CudaDevice::RoundToPrecision(ScalarType type, float* data, size_t n) {
  Check(cuda::RoundToPrecision(type, data, n, stream()), "RoundToPrecision");
}

void CudaDevice::Accumulate(TensorRef dst, ConstTensorRef src, size_t n) {
  Check(cuda::Accumulate(dst, src, n, stream()), "Accumulate");
}

void CudaDevice::Multiply(float* data, size_t n, float factor) {
  Check(cuda::Multiply(data, n, factor, stream()), "Multiply");
}

void CudaDevice::Divide(float* data, size_t n, float divisor) {
  Check(cuda::Divide(data, n, divisor, stream()), "Divide");
}

absl::StatusOr<bool> CudaDevice::MultiplyAndCheckFinite(float* data, size_t n, float factor) {
  Buffer flag(allocator(), 1, MemoryCategory::kCommunication, ScalarType::kFloat32);
  auto* found = flag.as<int>();
  Check(ScaleAndCheckFinite(data, n, factor, found, stream()), "ScaleAndCheckFinite");
  int host = 0;
  RETURN_IF_ERROR(Fetch(&host, found, sizeof(host)));
  return host != 0;
}

// The partials are freed as the kernels are enqueued: the caching allocator reuses them
// only for later work on this stream.
void CudaDevice::AddSquaredNorm(const float* data, size_t n, double* sum) {
  Buffer partials(allocator(), ReductionPartials(n), MemoryCategory::kCommunication,
                  ScalarType::kFloat64, false);
  Check(cuda::AddSquaredNorm(data, n, partials.as<double>(), sum, stream()), "AddSquaredNorm");
}

void CudaDevice::DoubleToFloat(const double* in, float* out, size_t n) {
  Check(cuda::DoubleToFloat(in, out, n, stream()), "DoubleToFloat");
}

void CudaDevice::ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm,
                            ScalarType values) {
  Check(cuda::ClipToNorm(data, n, squared_norm, max_norm, values, stream()), "ClipToNorm");
}

// With 16-bit operands the GEMMs run on tensor cores in that type (FP32 accumulation): an
// operand stored in it is read in place, one stored in FP32 (holding such values) is
// narrowed into a copy first. Outputs are written in their storage type by the GEMM
// itself (rounded once); weight gradients accumulate in FP32.
void CudaDevice::LinearForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t batch,
                               int64_t in, int64_t out, TensorRef y, ScalarType operands) {
  if (operands == ScalarType::kFloat32) {
    Check(WithComputeBlas([&](Blas& blas) {
      return blas.LinearForward(x.f32(), w.f32(), b, batch, in, out, y.f32());
    }));
    return;
  }
  const TypedOperand x16(operands, x, batch * in, allocator(), stream());
  const TypedOperand w16(operands, w, out * in, allocator(), stream());
  if (const absl::Status ready = FirstError({&x16, &w16}); !ready.ok()) {
    Check(ready);
    return;
  }
  Check(WithComputeBlas([&](Blas& blas) {
    return blas.LinearForward(x16.data(), w16.data(), b, batch, in, out, y.data(),
                              {operands, y.type()});
  }));
}

Buffer CudaDevice::LinearActivationForward(v1::Activation act, ConstTensorRef x, ConstTensorRef w,
                                           ConstTensorRef b, int64_t batch, int64_t in, int64_t out,
                                           TensorRef pre, ScalarType operands) {
  // Only a GELU has an epilogue; any other activation (RELU, also when the spec left it
  // unspecified) runs after the GEMM. The epilogue reads x and w in place, so they must be
  // stored in the operands' type; others go the unfused way, which narrows a copy.
  if ((act == v1::GELU || act == v1::GELU_TANH) && x.type() == operands && w.type() == operands) {
    LinearEpilogueQuery query = EpilogueQuery(act, false, operands, pre.type(), pre.type(), out);
    query.bias = !b.null();
    if (const std::optional<LinearEpilogue> epilogue = ChooseLinearEpilogue(query)) {
      Buffer y(allocator(), static_cast<size_t>(batch * out), MemoryCategory::kActivations,
               pre.type(), /*zero=*/false);
      // Stored in the operands' type (the epilogue's rule): x and w are used in place.
      const absl::Status fused = WithComputeBlas([&](Blas& blas) {
        return blas.LinearEpilogueForward(x.data(), w.data(), b, batch, in, out, pre.data(),
                                          y.data(), *epilogue, {operands, pre.type()});
      });
      if (!absl::IsUnimplemented(fused)) {
        Check(fused);
        return y;
      }
    }
  }
  return Device::LinearActivationForward(act, x, w, b, batch, in, out, pre, operands);
}

void CudaDevice::ActivationLinearBackward(v1::Activation act, ConstTensorRef pre, ConstTensorRef x,
                                          ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                                          int64_t in, int64_t out, TensorRef dpre, float* dw,
                                          float* db, ScalarType operands) {
  const LinearEpilogueQuery query = EpilogueQuery(act, true, operands, pre.type(), dpre.type(), in);
  // As in the forward: w and dy are read in place, so only where stored in the operands' type.
  const bool in_place = w.type() == operands && dy.type() == operands;
  const std::optional<LinearEpilogue> epilogue =
      in_place ? ChooseInputGradEpilogue(query) : std::nullopt;
  if (epilogue) {
    const absl::Status fused = WithComputeBlas([&](Blas& blas) {
      return blas.LinearInputGradEpilogue(w.data(), dy.data(), batch, in, out, pre.data(),
                                          dpre.data(), *epilogue, {operands, dpre.type()});
    });
    if (!absl::IsUnimplemented(fused)) {
      Check(fused);
      // The weight's and the bias's gradients, as LinearBackward adds them.
      LinearBackward(x, w, dy, batch, in, out, nullptr, dw, db, operands);
      return;
    }
  }
  Device::ActivationLinearBackward(act, pre, x, w, dy, batch, in, out, dpre, dw, db, operands);
}

LinearEpilogueQuery CudaDevice::EpilogueQuery(v1::Activation act, bool derivative,
                                              ScalarType operands, ScalarType pre,
                                              ScalarType output, int64_t columns) {
  LinearEpilogueQuery query;
  query.activation = act;
  query.operands = operands;
  query.pre = pre;
  query.output = output;
  query.out = columns;
  if (act == v1::GELU || act == v1::GELU_TANH) {
    const GeluEpilogueFormulas& formulas = EpilogueGelu();
    const GeluFit& fit = derivative ? formulas.derivative : formulas.value;
    query.epilogue_gelu = FusedActivation(fit.formula);
    query.epilogue_gelu_error = FittedError(fit);
  }
  return query;
}

const GeluEpilogueFormulas& CudaDevice::EpilogueGelu() {
  if (!epilogue_gelu_.has_value()) {
    // A probe that fails leaves GELU unfused: the job runs as it did without epilogues.
    // (A device fault stays sticky and fails the next operation.)
    const absl::StatusOr<GeluEpilogueFormulas> formulas = blas_->ProbeGelu();
    epilogue_gelu_.emplace();
    if (formulas.ok()) {
      epilogue_gelu_ = *formulas;
    } else {
      cudaGetLastError();  // not the next launch's error to report (sticky faults stay)
      const std::string failed =
          absl::StrCat("the probe failed (", formulas.status().ToString(), "): GELU is not fused");
      LogWarning(LogContext(), absl::StrCat("measuring cuBLASLt's GELU epilogues: ", failed));
      epilogue_gelu_->value.unmeasured = epilogue_gelu_->derivative.unmeasured = failed;
    }
    LogInfo(
        LogContext(),
        absl::StrCat("cuBLASLt's GELU epilogues, measured: GELU_AUX_BIAS's value ",
                     DescribeGeluFit(epilogue_gelu_->value), "; DGELU's derivative ",
                     DescribeGeluFit(epilogue_gelu_->derivative),
                     " (each fused into a Linear's GEMM for the form it computes only, "
                     "where its error is within FusableGeluError: ",
                     DescribeGeluFusion(epilogue_gelu_->value, epilogue_gelu_->derivative), ")"));
  }
  return *epilogue_gelu_;
}

// The bias's gradient sums dy as stored (its values are the same in either storage).
void CudaDevice::LinearBackward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef dy,
                                int64_t batch, int64_t in, int64_t out, TensorRef dx, float* dw,
                                float* db, ScalarType operands) {
  if (operands == ScalarType::kFloat32) {
    Check(WithComputeBlas([&](Blas& blas) {
      return blas.LinearBackward(x.f32(), w.f32(), dy.f32(), batch, in, out, dx.f32(), dw);
    }));
  } else {
    const TypedOperand x16(operands, x, batch * in, allocator(), stream());
    const TypedOperand w16(operands, w, out * in, allocator(), stream());
    const TypedOperand dy16(operands, dy, batch * out, allocator(), stream());
    if (const absl::Status ready = FirstError({&x16, &w16, &dy16}); !ready.ok()) {
      Check(ready);  // kept: the step fails, so the bias's gradient is not summed either
      return;
    }
    const ScalarType dx_type = dx.null() ? ScalarType::kFloat32 : dx.type();
    Check(WithComputeBlas([&](Blas& blas) {
      return blas.LinearBackward(x16.data(), w16.data(), dy16.data(), batch, in, out, dx.data(), dw,
                                 {operands, dx_type});
    }));
  }
  if (db != nullptr) Check(AddColumnSums(dy, batch, out, db, stream()), "AddColumnSums");
}

void CudaDevice::ActivationForward(v1::Activation act, ConstTensorRef x, size_t n, TensorRef y) {
  Check(cuda::ActivationForward(KernelActivation(act), x, n, y, stream()), "ActivationForward");
}

void CudaDevice::ActivationBackward(v1::Activation act, ConstTensorRef x, ConstTensorRef dy,
                                    size_t n, TensorRef dx) {
  Check(cuda::ActivationBackward(KernelActivation(act), x, dy, n, dx, stream()),
        "ActivationBackward");
}

void CudaDevice::EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                                  TensorRef out) {
  Check(cuda::EmbeddingForward(table, ids, n, dim, out, stream()), "EmbeddingForward");
}

void CudaDevice::EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n, int64_t dim,
                                   float* dtable) {
  const cudaStream_t s = stream();  // binds this thread to the GPU CUB's size query asks
  const size_t bytes = EmbeddingBackwardScratchBytes(n);
  Buffer scratch(allocator(), (bytes + sizeof(int64_t) - 1) / sizeof(int64_t),
                 MemoryCategory::kActivations, ScalarType::kInt64, false);
  Check(cuda::EmbeddingBackward(ids, dout, n, dim, dtable, scratch.as<void>(), scratch.bytes(), s),
        "EmbeddingBackward");
}

// The norms read and write their rows in the storage type, and read their weights
// (parameters, 16-bit in 16-bit storage) in place.
void CudaDevice::LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b,
                                  int64_t rows, int64_t dim, float eps, TensorRef y, float* mean,
                                  float* rstd) {
  Check(cuda::LayerNormForward(x, w, b, rows, dim, eps, y, mean, rstd, stream()),
        "LayerNormForward");
}

void CudaDevice::LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                   const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                   TensorRef dx, float* dw, float* db) {
  Buffer partials(allocator(), LayerNormBackwardPartials(rows, dim), MemoryCategory::kActivations,
                  ScalarType::kFloat64, false);
  Check(cuda::LayerNormBackward(x, w, mean, rstd, dy, rows, dim, dx, /*add_to_dx=*/false, dw, db,
                                partials.as<double>(), stream()),
        "LayerNormBackward");
}

void CudaDevice::RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim,
                                float eps, TensorRef y, float* rstd) {
  Check(cuda::RmsNormForward(x, w, rows, dim, eps, y, rstd, stream()), "RmsNormForward");
}

Buffer CudaDevice::RmsNormPartials(int64_t rows, int64_t dim, const float* dw) {
  if (dw == nullptr) return Buffer();
  return Buffer(allocator(), RmsNormBackwardPartials(rows, dim), MemoryCategory::kActivations,
                false);
}

void CudaDevice::RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                 ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                                 float* dw) {
  Buffer partials = RmsNormPartials(rows, dim, dw);
  Check(cuda::RmsNormBackward(x, w, rstd, dy, rows, dim, dx, /*add_to_dx=*/false, dw,
                              partials.data(), stream()),
        "RmsNormBackward");
}

void CudaDevice::AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                     ConstTensorRef b, int64_t rows, int64_t dim, float eps,
                                     TensorRef y, float* mean, float* rstd, ScalarType compute) {
  if (x.type() != compute) {
    return Device::AddLayerNormForward(x, residual, w, b, rows, dim, eps, y, mean, rstd, compute);
  }
  Check(cuda::AddLayerNormForward(x, residual, w, b, rows, dim, eps, y, mean, rstd, stream()),
        "AddLayerNormForward");
}

void CudaDevice::LayerNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                      const float* rstd, ConstTensorRef dy, int64_t rows,
                                      int64_t dim, TensorRef dresidual, float* dw, float* db,
                                      ScalarType compute) {
  if (dresidual.type() != compute) {
    return Device::LayerNormBackwardAdd(x, w, mean, rstd, dy, rows, dim, dresidual, dw, db,
                                        compute);
  }
  Buffer partials(allocator(), LayerNormBackwardPartials(rows, dim), MemoryCategory::kActivations,
                  ScalarType::kFloat64, false);
  Check(cuda::LayerNormBackward(x, w, mean, rstd, dy, rows, dim, dresidual,
                                /*add_to_dx=*/true, dw, db, partials.as<double>(), stream()),
        "LayerNormBackward");
}

void CudaDevice::AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                   int64_t rows, int64_t dim, float eps, TensorRef y, float* rstd,
                                   ScalarType compute) {
  if (x.type() != compute) {
    return Device::AddRmsNormForward(x, residual, w, rows, dim, eps, y, rstd, compute);
  }
  Check(cuda::AddRmsNormForward(x, residual, w, rows, dim, eps, y, rstd, stream()),
        "AddRmsNormForward");
}

void CudaDevice::RmsNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                    ConstTensorRef dy, int64_t rows, int64_t dim,
                                    TensorRef dresidual, float* dw, ScalarType compute) {
  if (dresidual.type() != compute) {
    return Device::RmsNormBackwardAdd(x, w, rstd, dy, rows, dim, dresidual, dw, compute);
  }
  Buffer partials = RmsNormPartials(rows, dim, dw);
  Check(cuda::RmsNormBackward(x, w, rstd, dy, rows, dim, dresidual, /*add_to_dx=*/true, dw,
                              partials.data(), stream()),
        "RmsNormBackward");
}

void CudaDevice::Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                        int64_t heads, int64_t head_dim, bool inverse) {
  Check(cuda::Rotary(x, cos, sin, rows, seq, heads, head_dim, inverse, stream()), "Rotary");
}

void CudaDevice::PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                                int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv) {
  Check(cuda::PackGroupedQkv(q, k, v, rows, heads, kv_heads, head_dim, qkv, stream()),
        "PackGroupedQkv");
}

void CudaDevice::UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads,
                                      int64_t kv_heads, int64_t head_dim, TensorRef dq,
                                      TensorRef dk, TensorRef dv) {
  Check(cuda::UnpackGroupedQkvGrad(dqkv, rows, heads, kv_heads, head_dim, dq, dk, dv, stream()),
        "UnpackGroupedQkvGrad");
}

void CudaDevice::MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out) {
  Check(cuda::MultiplyElementwise(a, b, n, out, stream()), "MultiplyElementwise");
}

// Attention's GEMMs use cuBLAS on the compute stream: like the Linear layers, they run on
// the training thread.
void CudaDevice::AttentionForward(ConstTensorRef qkv, const AttentionShape& shape, TensorRef out,
                                  float* probs, ScalarType operands) {
  Check(WithComputeBlas([&](Blas& blas) {
    return cuda::AttentionForward({&blas, allocator(), stream(), operands}, shape, qkv, out, probs);
  }));
}

void CudaDevice::AttentionBackward(ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                                   const AttentionShape& shape, TensorRef dqkv,
                                   ScalarType operands) {
  Check(WithComputeBlas([&](Blas& blas) {
    return cuda::AttentionBackward({&blas, allocator(), stream(), operands}, shape, qkv, probs,
                                   dout, dqkv);
  }));
}

absl::StatusOr<FusedAttentionKernel> CudaDevice::ChooseFusedAttention(const AttentionLayout& layout,
                                                                      ScalarType operands) {
  if (stream() != compute_.get()) {
    return absl::InternalError(
        "an attention was issued from a thread that is not computing on the compute stream "
        "(only the training thread runs layers)");
  }
  if (auto known = fused_attention_kernels_.find({layout, operands});
      known != fused_attention_kernels_.end()) {
    return known->second;
  }
  ASSIGN_OR_RETURN(const FusedAttentionChoice choice, DecideFusedAttention(layout, operands));
  LogInfo(LogContext(),
          absl::StrCat("FUSED attention (batch ", layout.batch, ", T ", layout.seq, ", ",
                       layout.heads, " heads, ", layout.kv_heads, " K/V heads of ", layout.head_dim,
                       ", ", ScalarTypeName(operands), "): ", choice.reason));
  fused_attention_kernels_[{layout, operands}] = choice.kernel;
  return choice.kernel;
}

absl::StatusOr<FusedAttentionChoice> CudaDevice::DecideFusedAttention(const AttentionLayout& layout,
                                                                      ScalarType operands) {
  const v1::CudaOptions::FusedAttentionKernel requested = options_.fused_attention_kernel;
  ASSIGN_OR_RETURN(FusedAttentionChoice by_rules,
                   ChooseFusedAttentionKernel(requested, cudnn_facts_, layout, operands,
                                              BackwardKindOf(options_.attention_backward)));
  if (by_rules.kernel == FusedAttentionKernel::kCudaCores) return by_rules;
  // The rules allow cuDNN; whether it builds plans for this graph here is cuDNN's to say.
  absl::Status plans = ComputeCudnnAttention().status();
  if (plans.ok()) plans = cudnn_->Prepare(layout, GraphIo(operands));
  return ConfirmCudnnAttention(requested, cudnn_facts_, plans);
}

absl::StatusOr<CudnnFusedAttention*> CudaDevice::ComputeCudnnAttention() {
  RETURN_IF_ERROR(OnComputeStream("an attention"));
  if (cudnn_fused_ == nullptr) {
    ASSIGN_OR_RETURN(cudnn_, CudnnAttention::Create(cudnn_facts_, compute_.get(), allocator(),
                                                    BackwardKindOf(options_.attention_backward)));
    cudnn_fused_ = std::make_unique<CudnnFusedAttention>(cudnn_.get(), allocator(), compute_.get());
  }
  return cudnn_fused_.get();
}

Buffer CudaDevice::PackedForCudaCores(const QkvSpan<ConstTensorRef>& qkv,
                                      const AttentionShape& shape) {
  Buffer packed(allocator(), shape.batch * shape.seq * 3 * shape.width(),
                MemoryCategory::kActivations, qkv.q.type(), false);
  Check(cuda::PackGroupedQkv(qkv.q, qkv.k, qkv.v, shape.batch * shape.seq, shape.heads,
                             qkv.kv_heads, shape.head_dim, packed.ref(), stream()),
        "PackGroupedQkv");
  return packed;
}

void CudaDevice::CudaCoreAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                          const AttentionShape& shape, TensorRef out, float* lse) {
  const Buffer packed = qkv.packed ? Buffer() : PackedForCudaCores(qkv, shape);
  Check(cuda::FusedAttentionForward(qkv.packed ? qkv.q : packed.ref(), shape, out, lse, stream()),
        "FusedAttentionForward");
}

void CudaDevice::CudaCoreAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                           const float* lse, ConstTensorRef dout,
                                           const AttentionShape& shape,
                                           const QkvSpan<TensorRef>& dqkv) {
  const int64_t rows = shape.batch * shape.seq;
  Buffer dots(allocator(), shape.batch * shape.heads * shape.seq, MemoryCategory::kActivations,
              false);
  if (qkv.packed) {
    Check(cuda::FusedAttentionBackward(qkv.q, out, lse, dout, shape, dots.data(), dqkv.q, stream()),
          "FusedAttentionBackward");
    return;
  }
  const Buffer packed = PackedForCudaCores(qkv, shape);
  // FP32 working space: each query head's K/V gradient stays in float until its group's
  // sum is rounded once into dk and dv.
  Buffer packed_grad(allocator(), packed.numel(), MemoryCategory::kActivations, false);
  Check(cuda::FusedAttentionBackward(packed.ref(), out, lse, dout, shape, dots.data(),
                                     packed_grad.ref(), stream()),
        "FusedAttentionBackward");
  Check(cuda::UnpackGroupedQkvGrad(packed_grad.ref(), rows, shape.heads, dqkv.kv_heads,
                                   shape.head_dim, dqkv.q, dqkv.k, dqkv.v, stream()),
        "UnpackGroupedQkvGrad");
}

// The CUDA-core kernel reads and writes the storage type where it keeps its rows in
// registers (contracts/cuda_attention_rows.h); elsewhere 16-bit storage goes to it as FP32
// copies (compute/float_views.h), with the same bits.
namespace {
bool CudaCoresNeedFloatCopies(ScalarType stored, const AttentionShape& shape) {
  return stored != ScalarType::kFloat32 && !CudaAttentionHasRegisterRows(shape.head_dim);
}
}  // namespace

void CudaDevice::FusedAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                       const AttentionShape& shape, TensorRef out, float* lse,
                                       ScalarType operands) {
  const absl::StatusOr<FusedAttentionKernel> kernel =
      ChooseFusedAttention(AttentionLayout::Of(shape, qkv), operands);
  if (!kernel.ok()) return Check(kernel.status());
  if (*kernel == FusedAttentionKernel::kCudnn) {
    const absl::StatusOr<CudnnFusedAttention*> cudnn = ComputeCudnnAttention();
    if (!cudnn.ok()) return Check(cudnn.status());
    return Check((*cudnn)->Forward(operands, shape, qkv, out, lse));
  }
  if (!CudaCoresNeedFloatCopies(qkv.q.type(), shape)) {
    return CudaCoreAttentionForward(qkv, shape, out, lse);
  }
  const FloatQkvInput fqkv(*this, qkv, shape);
  const FloatOutput fout(*this, out, shape.batch * shape.seq * shape.width());
  CudaCoreAttentionForward(fqkv.span(), shape, fout.get(), lse);
}

void CudaDevice::FusedAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                        const float* lse, ConstTensorRef dout,
                                        const AttentionShape& shape, const QkvSpan<TensorRef>& dqkv,
                                        ScalarType operands) {
  if (!qkv.SameLayout(dqkv)) {
    return Check(absl::InternalError(
        "FusedAttentionBackward: the gradients are not laid out as q, k and v"));
  }
  const absl::StatusOr<FusedAttentionKernel> kernel =
      ChooseFusedAttention(AttentionLayout::Of(shape, qkv), operands);
  if (!kernel.ok()) return Check(kernel.status());
  if (*kernel == FusedAttentionKernel::kCudnn) {
    const absl::StatusOr<CudnnFusedAttention*> cudnn = ComputeCudnnAttention();
    if (!cudnn.ok()) return Check(cudnn.status());
    return Check((*cudnn)->Backward(operands, shape, qkv, out, lse, dout, dqkv));
  }
  if (!CudaCoresNeedFloatCopies(qkv.q.type(), shape)) {
    return CudaCoreAttentionBackward(qkv, out, lse, dout, shape, dqkv);
  }
  const int64_t rows = shape.batch * shape.seq;
  const FloatQkvInput fqkv(*this, qkv, shape);
  const FloatInput fout(*this, out, rows * shape.width()), fdout(*this, dout, rows * shape.width());
  const FloatQkvOutput fdqkv(*this, dqkv, shape);
  CudaCoreAttentionBackward(fqkv.span(), fout.get(), lse, fdout.get(), shape, fdqkv.span());
}

void CudaDevice::CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                              int64_t classes, float scale, TensorRef dlogits, double* loss) {
  // The scratch goes back to this stream's pool at once: the allocator hands it out again
  // only to later work on the same stream (cuda_allocator.h).
  Buffer rows(allocator(), batch, MemoryCategory::kActivations, ScalarType::kFloat64, false);
  Check(cuda::CrossEntropy(logits, labels, batch, classes, scale, dlogits, rows.as<double>(), loss,
                           stream()),
        "CrossEntropy");
}

void CudaDevice::MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t batch,
                                  int64_t out, float scale, TensorRef dpred, double* loss) {
  const int64_t n = batch * out;
  Buffer partials(allocator(), ReductionPartials(n), MemoryCategory::kActivations,
                  ScalarType::kFloat64, false);
  Check(
      cuda::MeanSquaredError(pred, target, n, scale, dpred, partials.as<double>(), loss, stream()),
      "MeanSquaredError");
}

void CudaDevice::SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
                           float* momentum, size_t n) {
  Check(cuda::SgdUpdate(s, first, param, grad, momentum, n, stream()), "SgdUpdate");
}

void CudaDevice::AdamWUpdateSpans(const AdamWScalars& s, float* param, const float* grad,
                                  float* exp_avg, float* exp_avg_sq,
                                  const std::vector<UpdateSpan>& spans) {
  for (const SpanTable& table : SpanTables(spans)) {
    Check(cuda::AdamWUpdateSpans(s, param, grad, exp_avg, exp_avg_sq, table, stream()),
          "AdamWUpdateSpans");
  }
}

void CudaDevice::AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                             float* exp_avg_sq, size_t n) {
  Check(cuda::AdamWUpdate(s, param, grad, exp_avg, exp_avg_sq, n, stream()), "AdamWUpdate");
}

}  // namespace shardwise::cuda
