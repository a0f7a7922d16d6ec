#ifndef SHARDWISE_WORKER_CUDA_CUDA_DEVICE_H_
#define SHARDWISE_WORKER_CUDA_CUDA_DEVICE_H_

// The CUDA implementation of compute/device.h: one GPU, a caching device allocator, the
// kernels of kernels.h and cuBLAS GEMMs (blas.h), on FSDP's streams: compute (the
// training thread's), unshard (the all-gather thread's), post-backward (the reduction
// thread's and the mixed-precision hook's upcast threads') and all-reduce (the replicate
// group's NCCL collectives); the device communicators enqueue on the stream of the lane
// they serve. Fences are CUDA events; a stream waits
// for one without blocking the host.
//
// Mixed precision runs the GEMMs on BF16/FP16 tensor cores with FP32 accumulation; the
// operands hold values rounded to param_dtype, as on the CPU, so both paths compute the
// same sums up to their order. A 16-bit job's activations and unsharded parameters are
// stored in FP32 by default, or in param_dtype itself with cuda.storage PARAM_DTYPE: then
// the GEMMs read their operands in place and write their outputs in it, as do the
// embedding lookup, the bias broadcast and its gradient, the activations, the residual
// sums, the norms, the rotary embeddings, both attentions' products, the grouped K/V
// packing, the CUDA-core attention kernel (at head sizes 32, 64 and 128) and the losses
// (storage_elements.cuh), the norms reading their 16-bit weights in place too; the
// CUDA-core attention at other head sizes computes on FP32 copies
// (compute/float_views.h). FUSED attention
// runs cuDNN's flash attention where cudnn_requirements.h says it can (BF16/FP16 operands), else
// the CUDA-core kernel of fused_attention.h; the first use of each choice is logged with its
// reason.
//
// Thread-safety: as Device. Each thread that uses the device selects its GPU on first use.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "worker/compute/device.h"
#include "worker/cuda/blas.h"
#include "worker/cuda/cuda_allocator.h"
#include "worker/cuda/cudnn_attention.h"
#include "worker/cuda/cudnn_fused_attention.h"
#include "worker/cuda/cudnn_requirements.h"
#include "worker/cuda/event_pool.h"
#include "worker/cuda/pinned_uploads.h"
#include "worker/cuda/stream.h"
#include "worker/cuda/stream_clock.h"

namespace shardwise::cuda {

struct CudaDeviceOptions {
  int gpu = 0;              // CUDA device ordinal
  bool allow_tf32 = false;  // FP32 GEMMs on TF32 tensor cores (job: cuda.allow_tf32)
  // A debugging mode: every operation has finished on its stream when it returns (and
  // every NCCL collective has completed), as CUDA_LAUNCH_BLOCKING=1 makes kernel launches
  // wait, so that a run can be compared with a much less overlapped one. A result that
  // changes with it points at a missing stream dependency; one that does not proves
  // little, since other threads' streams still overlap (the CPU's stream-ordering checker,
  // worker/testing/async_cpu_device.h, is the systematic check). Slow; see
  // SynchronousModeRequested().
  bool synchronous = false;
  // The kernel behind FUSED attention (job: cuda.fused_attention_kernel; cudnn_requirements.h
  // decides per shape and dtype).
  v1::CudaOptions::FusedAttentionKernel fused_attention_kernel =
      v1::CudaOptions::FUSED_ATTENTION_KERNEL_UNSPECIFIED;
  // What a 16-bit job's activations and unsharded parameters are stored in (job:
  // cuda.storage; Device::StorageType).
  v1::CudaOptions::Storage storage = v1::CudaOptions::STORAGE_UNSPECIFIED;
  // How cuDNN's attention computes its backward (job: cuda.attention_backward).
  v1::CudaOptions::AttentionBackward attention_backward =
      v1::CudaOptions::ATTENTION_BACKWARD_UNSPECIFIED;
};

// The environment variable that turns synchronous mode on for every CUDA rank of a process
// (the worker daemon, the GPU tests): SHARDWISE_CUDA_SYNCHRONOUS=1.
inline constexpr char kSynchronousModeVariable[] = "SHARDWISE_CUDA_SYNCHRONOUS";
// True when kSynchronousModeVariable is "1".
bool SynchronousModeRequested();

class CudaDevice final : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(const CudaDeviceOptions& options);
  ~CudaDevice() override;

  v1::DeviceKind kind() const override { return v1::CUDA; }
  Allocator* allocator() override { return allocator_.get(); }
  ScalarType StorageType(ScalarType compute) const override {
    return options_.storage == v1::CudaOptions::STORAGE_PARAM_DTYPE ? compute
                                                                    : ScalarType::kFloat32;
  }
  cudaStream_t compute_stream() const { return compute_.get(); }
  cudaStream_t communication_stream(CommLane lane) const {
    switch (lane) {
      case CommLane::kUnshard:
        return unshard_.get();
      case CommLane::kAllReduce:
        return all_reduce_.get();
      case CommLane::kReduction:
        break;
    }
    return post_backward_.get();
  }
  // The calling thread's stream (binding the thread to this device's GPU).
  cudaStream_t CurrentStream() { return stream(); }
  bool synchronous() const { return options_.synchronous; }

  void UseCommunicationStream(CommLane lane) override;
  std::shared_ptr<Fence> RecordFence() override;
  void WaitForFence(const Fence* fence) override;
  absl::Status WaitForFenceOnHost(const Fence* fence) override;
  bool FencePassed(const Fence* fence) override;
  absl::Status Synchronize() override;
  absl::Status status() const override;
  StreamClock* stream_clock() override { return clock_.get(); }

  // Everything else the Device interface asks for (the GPT's layers: transformer_kernels.h
  // and attention.h; the Llama's: llama_kernels.h).
#include "worker/compute/device_overrides.inc"
  // One cuBLASLt GEMM with a GELU epilogue where gemm_epilogue.h's ChooseLinearEpilogue
  // (ChooseInputGradEpilogue) allows, the formulas measured when the device is made; else Device's
  // defaults.
  Buffer LinearActivationForward(v1::Activation act, ConstTensorRef x, ConstTensorRef w,
                                 ConstTensorRef b, int64_t batch, int64_t in, int64_t out,
                                 TensorRef pre, ScalarType operands) override;
  void ActivationLinearBackward(v1::Activation act, ConstTensorRef pre, ConstTensorRef x,
                                ConstTensorRef w, ConstTensorRef dy, int64_t batch, int64_t in,
                                int64_t out, TensorRef dpre, float* dw, float* db,
                                ScalarType operands) override;
  // One kernel where the rows are stored in `compute`'s type (the sums and the norm's
  // output round as their stores do); FP32 storage of 16-bit values takes Device's
  // defaults, which round in passes of their own.
  void AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w, ConstTensorRef b,
                           int64_t rows, int64_t dim, float eps, TensorRef y, float* mean,
                           float* rstd, ScalarType compute) override;
  void LayerNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* mean,
                            const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                            TensorRef dresidual, float* dw, float* db, ScalarType compute) override;
  void AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w, int64_t rows,
                         int64_t dim, float eps, TensorRef y, float* rstd,
                         ScalarType compute) override;
  void RmsNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* rstd, ConstTensorRef dy,
                          int64_t rows, int64_t dim, TensorRef dresidual, float* dw,
                          ScalarType compute) override;
  // One launch per kMaxSpansPerTable spans (kernels.h AdamWUpdateSpans).
  void AdamWUpdateSpans(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                        float* exp_avg_sq, const std::vector<UpdateSpan>& spans) override;

 private:
  explicit CudaDevice(const CudaDeviceOptions& options);
  // The calling thread's stream (the compute stream unless it chose the communication
  // stream); selects this device's GPU for the thread on first use.
  cudaStream_t stream();
  // The timeline lane of one of this device's streams (runtime/stream_clock.h).
  int StreamLane(cudaStream_t stream) const;
  // Each operation's outcome: keeps the first error (later calls report it) and, in
  // synchronous mode, waits for the whole GPU after an operation that succeeded.
  void Check(cudaError_t error, const char* what);
  void Check(const absl::Status& status);
  void KeepFirstError(const absl::Status& status);
  // OK when the calling thread computes on the compute stream (the training thread), where
  // GEMMs and cuDNN's attention are bound; else INTERNAL naming `what` (binds the thread
  // to the GPU).
  absl::Status OnComputeStream(const char* what);
  // Runs `gemm` with the GEMMs' handle, which runs on the compute stream: only a thread
  // computing on it (the training thread) may use it, or the GEMM would race the caller's
  // own work and its stream's blocks. From any other thread the GEMM is not issued and
  // an INTERNAL error is returned instead. Binds the thread to the GPU.
  absl::Status WithComputeBlas(const std::function<absl::Status(Blas&)>& gemm);
  // The GELU formulas cuBLASLt's epilogues compute, measured when the device is made
  // (Create) and logged.
  const GeluEpilogueFormulas& EpilogueGelu();
  // The query for fusing `act` with a GEMM whose output (and GELU's kept input) is
  // `output`, `columns` wide; `derivative`: the backward's DGELU.
  LinearEpilogueQuery EpilogueQuery(v1::Activation act, bool derivative, ScalarType operands,
                                    ScalarType pre, ScalarType output, int64_t columns);
  // Which kernel runs a FUSED attention of `layout` in `operands`: decided on first use
  // of each layout and dtype, from cudnn_requirements.h's rules and then by building
  // cuDNN's plans for both directions (a graph cuDNN cannot build on this GPU takes the
  // CUDA-core kernel, unless the job insists on cuDNN), logged with its reason, and kept,
  // so the forward and the backward always agree. An error where the job insists on
  // cuDNN and it cannot run, or on a thread other than the training thread's.
  absl::StatusOr<FusedAttentionKernel> ChooseFusedAttention(const AttentionLayout& layout,
                                                            ScalarType operands);
  // The CUDA-core kernels' FUSED attention (cuda/fused_attention.h), which reads q, k and
  // v packed: q, k and v apart are first packed, K and V repeated to the query heads (and
  // the gradients unpacked, each K/V head's summed over its group).
  void CudaCoreAttentionForward(const QkvSpan<ConstTensorRef>& qkv, const AttentionShape& shape,
                                TensorRef out, float* lse);
  void CudaCoreAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                 const float* lse, ConstTensorRef dout, const AttentionShape& shape,
                                 const QkvSpan<TensorRef>& dqkv);
  // q, k and v apart, packed into a new [rows, 3 heads head_dim] of their type (K and V
  // repeated).
  Buffer PackedForCudaCores(const QkvSpan<ConstTensorRef>& qkv, const AttentionShape& shape);
  // RMSNorm's weight-gradient chunk sums (cuda::RmsNormBackwardPartials); none without dw.
  Buffer RmsNormPartials(int64_t rows, int64_t dim, const float* dw);
  // The first decision for a shape and dtype, with its reason for the log.
  absl::StatusOr<FusedAttentionChoice> DecideFusedAttention(const AttentionLayout& layout,
                                                            ScalarType operands);
  // cuDNN's attention on the compute stream, made on first use; an error on another thread.
  absl::StatusOr<CudnnFusedAttention*> ComputeCudnnAttention();
  // Copies `bytes` from the device to the host, waiting for the caller's stream.
  absl::Status Fetch(void* host_dst, const void* src, size_t bytes);

  // Declared first, so destroyed last: made by the destructor, it sets the destroying
  // thread's GPU back once every other member (cuBLAS, cuDNN, events, streams) is gone,
  // each with this device's GPU current.
  std::optional<ScopedCurrentGpu> on_gpu_while_destroyed_;
  const CudaDeviceOptions options_;
  const uint64_t id_;  // unique in the process: which device a thread is bound to
  Stream compute_, unshard_, post_backward_, all_reduce_;
  std::unique_ptr<CudaCachingAllocator> allocator_;
  std::unique_ptr<Blas> blas_;  // on the compute stream: GEMMs run on the training thread
  std::unique_ptr<CudaStreamClock> clock_;
  EventPool fence_events_;  // RecordFence's: no driver call to make one per fence
  // CopyFromHost's staging: no wait for the GPU per upload (its blocks made in Create).
  std::unique_ptr<PinnedUploads> uploads_;
  CudnnFacts cudnn_facts_;  // the cuDNN loaded and the GPU's compute capability
  // Made on the first cuDNN attention (the training thread's only).
  std::unique_ptr<CudnnAttention> cudnn_;
  std::unique_ptr<CudnnFusedAttention> cudnn_fused_;
  // The kernel decided for each (layout, dtype) (the training thread's only).
  absl::flat_hash_map<std::pair<AttentionLayout, ScalarType>, FusedAttentionKernel>
      fused_attention_kernels_;
  // EpilogueGelu's measurement (made in Create; read-only after).
  std::optional<GeluEpilogueFormulas> epilogue_gelu_;
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_CUDA_DEVICE_H_
