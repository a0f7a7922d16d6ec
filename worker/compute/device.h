#ifndef SHARDWISE_WORKER_COMPUTE_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_DEVICE_H_

// Where the FSDP runtime's buffers live and its arithmetic runs: the one interface the
// runtime (fsdp/) computes through, with a CPU implementation (cpu_device.h: BLAS and
// loops) and a CUDA one (cuda/cuda_device.h: kernels, cuBLAS, streams). The formulas are
// those of cpu/ and casts.h; pointers are the device's (from allocator()) unless a
// name says "host".
//
// Ordering. Operations are asynchronous on devices that have streams: each thread enqueues
// on its own stream (the training thread on the compute stream; a thread that called
// UseCommunicationStream() on that lane's stream), and every operation of one
// thread runs in the order it was issued. Work handed from one thread to another is
// ordered by a fence: the producer records one (RecordFence), the consumer waits for it
// (WaitForFence) before it touches the data. CopyToHost and the reductions that return a
// host value wait for the calling thread's stream; Synchronize waits
// without copying. On the CPU every operation completes before it returns.
//
// Errors. The operations return nothing: a device error (a failed launch, a fault) is kept
// and returned by the next status(), Synchronize() or host-returning call, as CUDA itself
// keeps errors sticky. The runtime checks at every micro-step's end.
//
// Thread-safety: operations may be called from several threads (each on its stream).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/job_spec.pb.h"
#include "worker/compute/attention_shape.h"
#include "worker/compute/optimizer_scalars.h"
#include "worker/compute/update_spans.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/stream_clock.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise {

class Device {
 public:
  virtual ~Device() = default;

  virtual v1::DeviceKind kind() const = 0;
  virtual Allocator* allocator() = 0;

  // ---- ordering ----
  // The communication streams, as FSDP's: all-gathers on the unshard stream; gradient
  // reductions (and what finishes them) on the post-backward stream; the replicate
  // group's all-reduce (HYBRID strategies, DDP's hooks) on the all-reduce stream.
  enum class CommLane { kUnshard, kReduction, kAllReduce };
  // From now on this thread's operations go on `lane`'s stream (the threads that run
  // collectives, and the threads that finish reductions).
  virtual void UseCommunicationStream(CommLane lane) {}
  class Fence {
   public:
    virtual ~Fence() = default;
  };
  // A point in this thread's stream; null where every operation is already complete.
  virtual std::shared_ptr<Fence> RecordFence() { return nullptr; }
  // This thread's later operations wait for `fence` (null: nothing to wait for).
  virtual void WaitForFence(const Fence* fence) {}
  // The host waits until the work before `fence` is done (null: returns at once).
  virtual absl::Status WaitForFenceOnHost(const Fence* fence) { return status(); }
  // Without waiting: whether the work before `fence` is done (null: true). A device error
  // found here is kept for status(), and the fence reads as passed.
  virtual bool FencePassed(const Fence* fence) { return true; }
  // Waits for this thread's stream; returns the first device error.
  virtual absl::Status Synchronize() { return status(); }
  virtual absl::Status status() const { return absl::OkStatus(); }
  // Times what the streams run, for the timeline's device spans; null where every
  // operation completes as it is called (the CPU).
  virtual StreamClock* stream_clock() { return nullptr; }

  // ---- storage ----
  // The type this device stores a job's activations and unsharded parameters in when the
  // job computes in `compute` (its param_dtype): FP32 here (16-bit values held exactly in
  // FP32 buffers and rounded where PyTorch holds them in param_dtype), or `compute` itself
  // on a device that keeps them in 16 bits, half the bytes and no casts around its 16-bit
  // kernels. The values, and so a job's results, are the same either way: every
  // operation writes a 16-bit output rounded once from the FP32 result that FP32 storage
  // would have rounded in place. Gradients, statistics (mean, rstd, lse), sharded master
  // parameters and optimizer state stay FP32 (float* arguments).
  virtual ScalarType StorageType(ScalarType compute) const { return ScalarType::kFloat32; }

  // ---- data movement ----
  virtual void CopyFromHost(void* dst, const void* host_src, size_t bytes) = 0;
  virtual absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void Copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void Zero(void* dst, size_t bytes) = 0;

  // ---- casts (compute/casts.h) ----
  virtual void Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) = 0;
  virtual void Widen(ScalarType type, const uint16_t* in, float* out, size_t n) = 0;
  virtual void RoundToPrecision(ScalarType type, float* data, size_t n) = 0;

  // ---- elementwise and reductions ----
  // dst += src (rounded to dst's type: a residual's sum, or a gradient's).
  virtual void Accumulate(TensorRef dst, ConstTensorRef src, size_t n) = 0;
  virtual void Multiply(float* data, size_t n, float factor) = 0;  // data *= factor
  virtual void Divide(float* data, size_t n, float divisor) = 0;   // data /= divisor
  // data *= factor; whether any value was inf or NaN before it was multiplied
  // (pointwise::UnscaleAndCheckNonFinite: the loss scaler's unscale, as torch checks).
  virtual absl::StatusOr<bool> MultiplyAndCheckFinite(float* data, size_t n, float factor) = 0;
  // Gradient clipping by global norm, without the host reading the norm: *sum (one device
  // double) += the sum of squares of data[n]; out[i] = in[i] as FP32 (the sum, for the
  // all-reduce); data[n] *= pointwise::ClipCoefficient(*squared_norm, max_norm),
  // computed on the device from one device float (unchanged when the coefficient is 1).
  // Gradients that hold `values` of a 16-bit type (keep_low_precision_grads) are scaled
  // as torch scales such tensors: by the coefficient rounded to the type, each product
  // rounded to it.
  virtual void AddSquaredNorm(const float* data, size_t n, double* sum) = 0;
  virtual void DoubleToFloat(const double* in, float* out, size_t n) = 0;
  virtual void ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm,
                          ScalarType values = ScalarType::kFloat32) = 0;

  // ---- the model's layers (compute/cpu/ states each formula) ----
  // Values come typed (runtime/tensor_ref.h) in StorageType(compute); an output is rounded
  // to its reference's type once, from FP32 arithmetic. The GEMMs' operands (x, w, dy)
  // hold values of `operands` (in FP32 storage, or in their own 16-bit type with mixed
  // precision); products accumulate in FP32. The CPU multiplies them as FP32; a GPU may run the
  // GEMM in `operands` on its tensor cores: the products of 16-bit values are exact in FP32, so
  // both compute the same sums, up to their order.
  virtual void LinearForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t batch,
                             int64_t in, int64_t out, TensorRef y, ScalarType operands) = 0;
  virtual void LinearBackward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                              int64_t in, int64_t out, TensorRef dx, float* dw, float* db,
                              ScalarType operands) = 0;
  virtual void ActivationForward(v1::Activation act, ConstTensorRef x, size_t n, TensorRef y) = 0;
  virtual void ActivationBackward(v1::Activation act, ConstTensorRef x, ConstTensorRef dy, size_t n,
                                  TensorRef dx) = 0;
  // A Linear and the activation after it (an MLP's first layer): pre = x W^T + b, kept for
  // the backward, and the returned y = act(pre) (an activation of pre's type), each rounded
  // to `operands` where stored in FP32. The default runs LinearForward then
  // ActivationForward, y allocated between them as the model did (fused_defaults.cc); the
  // CUDA device applies GELU in the GEMM's epilogue where cuBLASLt's formula is the job's
  // (cuda/gemm_epilogue.h), from the FP32 sum before its rounding to pre's 16-bit type
  // (docs/semantics.md, "Differences on purpose").
  virtual Buffer LinearActivationForward(v1::Activation act, ConstTensorRef x, ConstTensorRef w,
                                         ConstTensorRef b, int64_t batch, int64_t in, int64_t out,
                                         TensorRef pre, ScalarType operands);
  // The backward of a Linear whose input x was act(pre) (an MLP's second layer): dw and db
  // as LinearBackward adds them, and the gradient of pre, act'(pre) * (dy W), written into
  // dpre [batch, in] (its rounding points those of LinearBackward then ActivationBackward,
  // the default's sequence). The caller frees x after the call, where the model freed it
  // between the two: with the CPU's 16-bit storage the activation's FP32 scratch now sits
  // beside it, within what the memory estimate counts (gpt_training_test). The CUDA device
  // multiplies by GELU's derivative in the input gradient's GEMM where cuBLASLt's formula is the
  // job's, from the FP32 product.
  virtual void ActivationLinearBackward(v1::Activation act, ConstTensorRef pre, ConstTensorRef x,
                                        ConstTensorRef w, ConstTensorRef dy, int64_t batch,
                                        int64_t in, int64_t out, TensorRef dpre, float* dw,
                                        float* db, ScalarType operands);
  // out[i, :] = table[ids[i], :] for i < n (ids are device INT64 values below the rows).
  virtual void EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n, int64_t dim,
                                TensorRef out) = 0;
  // dtable[ids[i], :] += dout[i, :], deterministically (the same sums in the same order
  // on every run).
  virtual void EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n, int64_t dim,
                                 float* dtable) = 0;
  // LayerNorm over rows of `dim` (w, b may be null: 1 and 0); keeps mean and rstd [rows].
  virtual void LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b, int64_t rows,
                                int64_t dim, float eps, TensorRef y, float* mean, float* rstd) = 0;
  // Writes dx; adds to dw and db (null when w, b are).
  virtual void LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                 const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                 TensorRef dx, float* dw, float* db) = 0;
  // RMSNorm over rows of `dim` (the Llama's, HF LlamaRMSNorm): rstd = 1 / sqrt(mean(x^2) +
  // eps), kept [rows]; y = w * (x * rstd). The CPU sums the squares in double, the GPU in
  // float, a warp per row (compute/norm_rows.h).
  virtual void RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim,
                              float eps, TensorRef y, float* rstd) = 0;
  // Writes dx; adds to dw, its sum over rows in the chunked order llama_rows.h fixes.
  virtual void RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                               ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                               float* dw) = 0;
  // ---- a residual sum fused with the norm beside it (pre-norm blocks) ----
  // What a pre-norm block does between its branches, one pass over the rows where the
  // device fuses it (the CUDA device, where the rows are stored in `compute`'s type), else
  // these defaults, which run the operations one by one (the same values either way):
  // AddLayerNormForward: x = x + residual, then LayerNormForward(x) into y, each of x and
  // y rounded to `compute` where stored in FP32 (as RoundToPrecision).
  virtual void AddLayerNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                   ConstTensorRef b, int64_t rows, int64_t dim, float eps,
                                   TensorRef y, float* mean, float* rstd, ScalarType compute);
  // LayerNormBackward whose input gradient, rounded to `compute`, is added to `dresidual`
  // (the sum rounded) instead of written: the gradient of a block's input, which feeds
  // both the residual and the norm.
  virtual void LayerNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                    const float* rstd, ConstTensorRef dy, int64_t rows, int64_t dim,
                                    TensorRef dresidual, float* dw, float* db, ScalarType compute);
  // The same two for RMSNorm.
  virtual void AddRmsNormForward(TensorRef x, ConstTensorRef residual, ConstTensorRef w,
                                 int64_t rows, int64_t dim, float eps, TensorRef y, float* rstd,
                                 ScalarType compute);
  virtual void RmsNormBackwardAdd(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                  ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dresidual,
                                  float* dw, ScalarType compute);
  // Rotary position embeddings in HF's rotate-half layout, in place on x [rows, heads *
  // head_dim], row r at position r % seq: in each head, element i < head_dim / 2 and its
  // partner i + head_dim / 2, (a, b), become (a cos - b sin, b cos + a sin), cos and sin
  // read from the tables [positions, head_dim / 2] at (position, i). `inverse` rotates back
  // (the transpose: the backward).
  virtual void Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows, int64_t seq,
                      int64_t heads, int64_t head_dim, bool inverse) = 0;
  // Grouped-query attention into the fused layout the attentions take: qkv [rows, 3 * heads
  // * head_dim] from q [rows, heads * head_dim] and k, v [rows, kv_heads * head_dim], query
  // head h reading K/V head h / (heads / kv_heads) (HF's repeat_kv).
  virtual void PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v, int64_t rows,
                              int64_t heads, int64_t kv_heads, int64_t head_dim, TensorRef qkv) = 0;
  // Its transpose for the gradients: dq, and dk, dv each K/V head's sum over its query
  // heads in head order.
  virtual void UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads,
                                    int64_t kv_heads, int64_t head_dim, TensorRef dq, TensorRef dk,
                                    TensorRef dv) = 0;
  // out[i] = a[i] * b[i] (the SwiGLU's product and its gradients).
  virtual void MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n, TensorRef out) = 0;
  // Causal self-attention from the fused qkv [batch, seq, 3 * heads * head_dim] into out
  // [batch, seq, heads * head_dim], keeping the probabilities [batch, heads, seq, seq].
  // `operands` as for the GEMMs above.
  virtual void AttentionForward(ConstTensorRef qkv, const AttentionShape& shape, TensorRef out,
                                float* probs, ScalarType operands) = 0;
  // Writes dqkv [batch, seq, 3 * heads * head_dim].
  virtual void AttentionBackward(ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                                 const AttentionShape& shape, TensorRef dqkv,
                                 ScalarType operands) = 0;
  // The same function fused (compute/fused_attention_rows.h): instead of the
  // probabilities it keeps each query row's log-sum-exp, lse [batch, heads, seq], and the
  // backward recomputes the probabilities from it and from out. q, k and v are packed
  // (the GPT's) or apart with fewer K/V heads (the Llama's grouped-query attention, read
  // in place: no repeat_kv copy), attention_shape.h's QkvSpan. The CPU computes in FP32
  // whatever `operands` are; CUDA runs cuDNN's flash attention in `operands` where they
  // are BF16 or FP16 (docs/job-spec.md, "Attention on CUDA"), else an FP32 kernel.
  virtual void FusedAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                     const AttentionShape& shape, TensorRef out, float* lse,
                                     ScalarType operands) = 0;
  // Writes dq, dk and dv (`dqkv`, laid out as `qkv`); a K/V head's gradient is the sum
  // over its query heads.
  virtual void FusedAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                      const float* lse, ConstTensorRef dout,
                                      const AttentionShape& shape, const QkvSpan<TensorRef>& dqkv,
                                      ScalarType operands) = 0;
  // The losses take device logits/predictions and labels/targets and write the loss
  // (the mean times `scale`) to `loss`, one device double: nothing waits for it, so a
  // step runs on while its loss is still being computed (the trainer reads it later).
  // The gradient may be written over the input (dlogits == logits, dpred == pred): the
  // model does, so the logits and their gradient never take two buffers.
  virtual void CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                            int64_t classes, float scale, TensorRef dlogits, double* loss) = 0;
  virtual void MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t batch,
                                int64_t out, float scale, TensorRef dpred, double* loss) = 0;

  // ---- optimizers (fsdp/optimizer.h) on n elements, scalars from optimizer_scalars.h ----
  // `first`: the momentum buffer is uninitialised and becomes a copy of the gradient.
  virtual void SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
                         float* momentum, size_t n) = 0;
  virtual void AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                           float* exp_avg_sq, size_t n) = 0;
  // AdamW on several spans of one shard (param, grad and the moments point at its start):
  // the spans with `decay` take s.decay, the others none. By default one AdamWUpdate per
  // span; CUDA steps up to kMaxSpansPerTable spans per launch (update_spans.h). The same
  // values either way.
  virtual void AdamWUpdateSpans(const AdamWScalars& s, float* param, const float* grad,
                                float* exp_avg, float* exp_avg_sq,
                                const std::vector<UpdateSpan>& spans) {
    const AdamWScalars undecayed = s.WithoutDecay();
    for (const UpdateSpan& span : spans) {
      if (span.end <= span.begin) continue;
      AdamWUpdate(span.decay ? s : undecayed, param + span.begin, grad + span.begin,
                  exp_avg + span.begin, exp_avg_sq + span.begin,
                  static_cast<size_t>(span.end - span.begin));
    }
  }
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_DEVICE_H_
