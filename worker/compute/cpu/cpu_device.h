#ifndef SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_

// The CPU implementation of device.h: host memory from the given allocator, the layers
// of cpu/ (BLAS and loops) and casts.h. Every operation completes before it returns.

#include "worker/compute/device.h"

namespace shardwise {

class CpuDevice final : public Device {
 public:
  // `allocator` (not owned) must outlive the device.
  explicit CpuDevice(Allocator* allocator) : allocator_(allocator) {}

  v1::DeviceKind kind() const override { return v1::CPU; }
  Allocator* allocator() override { return allocator_; }

  void CopyFromHost(void* dst, const void* host_src, size_t bytes) override;
  absl::Status CopyToHost(void* host_dst, const void* src, size_t bytes) override;
  void Copy(void* dst, const void* src, size_t bytes) override;
  void Zero(void* dst, size_t bytes) override;

  void Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) override;
  void Widen(ScalarType type, const uint16_t* in, float* out, size_t n) override;
  void RoundToPrecision(ScalarType type, float* data, size_t n) override;

  void Accumulate(float* dst, const float* src, size_t n) override;
  void Multiply(float* data, size_t n, float factor) override;
  void Divide(float* data, size_t n, float divisor) override;
  absl::StatusOr<bool> MultiplyAndCheckFinite(float* data, size_t n, float factor) override;
  void AddSquaredNorm(const float* data, size_t n, double* sum) override;
  void DoubleToFloat(const double* in, float* out, size_t n) override;
  void ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm) override;

  void LinearForward(const float* x, const float* w, const float* b, int64_t batch, int64_t in,
                     int64_t out, float* y, ScalarType operands) override;
  void LinearBackward(const float* x, const float* w, const float* dy, int64_t batch, int64_t in,
                      int64_t out, float* dx, float* dw, float* db, ScalarType operands) override;
  void ActivationForward(v1::Activation act, const float* x, size_t n, float* y) override;
  void ActivationBackward(v1::Activation act, const float* x, const float* dy, size_t n,
                          float* dx) override;
  void EmbeddingForward(const float* table, const int64_t* ids, int64_t n, int64_t dim,
                        float* out) override;
  void EmbeddingBackward(const int64_t* ids, const float* dout, int64_t n, int64_t dim,
                         float* dtable) override;
  void LayerNormForward(const float* x, const float* w, const float* b, int64_t rows, int64_t dim,
                        float eps, float* y, float* mean, float* rstd) override;
  void LayerNormBackward(const float* x, const float* w, const float* mean, const float* rstd,
                         const float* dy, int64_t rows, int64_t dim, float* dx, float* dw,
                         float* db) override;
  void AttentionForward(const float* qkv, const AttentionShape& shape, float* out, float* probs,
                        ScalarType operands) override;
  void AttentionBackward(const float* qkv, const float* probs, const float* dout,
                         const AttentionShape& shape, float* dqkv, ScalarType operands) override;
  void FusedAttentionForward(const float* qkv, const AttentionShape& shape, float* out,
                             float* lse) override;
  void FusedAttentionBackward(const float* qkv, const float* out, const float* lse,
                              const float* dout, const AttentionShape& shape, float* dqkv) override;
  void CrossEntropy(const float* logits, const int64_t* labels, int64_t batch, int64_t classes,
                    float scale, float* dlogits, double* loss) override;
  void MeanSquaredError(const float* pred, const float* target, int64_t batch, int64_t out,
                        float scale, float* dpred, double* loss) override;

  void SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad, float* momentum,
                 size_t n) override;
  void AdamWUpdate(const AdamWScalars& s, float* param, const float* grad, float* exp_avg,
                   float* exp_avg_sq, size_t n) override;

 private:
  Allocator* const allocator_;
};

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_CPU_CPU_DEVICE_H_
