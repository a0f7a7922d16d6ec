#include "worker/testing/async_cpu_device.h"

#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"

namespace shardwise::testing {
namespace {

// The stream each thread issues on, per device (a thread serves one device at a time),
// named by the device's id as cuda_device.cc does.
thread_local uint64_t bound_device = 0;
thread_local EmulatedStream* bound_stream = nullptr;

uint64_t NextDeviceId() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}

// Stream `lane` of four (compute, unshard, post-backward, all-reduce)'s timing.
StreamTiming Seeded(const StreamTiming& timing, uint64_t lane) {
  constexpr uint64_t kPostBackward = 2;
  StreamTiming seeded = timing;
  seeded.seed = timing.seed * 4 + lane;
  if (lane == kPostBackward) seeded.min_pause = timing.reduction_lag;
  return seeded;
}

// A fence is a point in a stream: passed once the stream's task for it ran.
class PointPassed final : public Device::Fence, public std::enable_shared_from_this<PointPassed> {
 public:
  absl::Notification passed;
};

const PointPassed* AsPoint(const Device::Fence* fence) {
  return static_cast<const PointPassed*>(fence);
}

}  // namespace

AsyncCpuDevice::AsyncCpuDevice(const StreamTiming& timing, bool low_precision_storage)
    : id_(NextDeviceId()),
      cpu_(&scratch_, low_precision_storage),
      allocator_([this] { return &CurrentStream(); }),
      compute_("compute", Seeded(timing, 0)),
      unshard_("unshard", Seeded(timing, 1)),
      post_backward_("post-backward", Seeded(timing, 2)),
      all_reduce_("all-reduce", Seeded(timing, 3)) {}

AsyncCpuDevice::~AsyncCpuDevice() {
  DrainAll();
  if (bound_device == id_) bound_device = 0;
}

EmulatedStream& AsyncCpuDevice::CurrentStream() {
  if (bound_device != id_) {
    bound_device = id_;
    bound_stream = &compute_;
  }
  return *bound_stream;
}

EmulatedStream& AsyncCpuDevice::LaneStream(CommLane lane) {
  switch (lane) {
    case CommLane::kUnshard:
      return unshard_;
    case CommLane::kAllReduce:
      return all_reduce_;
    case CommLane::kReduction:
      break;
  }
  return post_backward_;
}

void AsyncCpuDevice::DrainAll() {
  for (EmulatedStream* stream : {&compute_, &unshard_, &post_backward_, &all_reduce_}) {
    stream->Drain();
  }
}

void AsyncCpuDevice::OrderAfterCaller(EmulatedStream& stream) {
  if (&stream == &CurrentStream()) return;
  auto point = std::make_shared<PointPassed>();
  Later([point] { point->passed.Notify(); });
  stream.Enqueue([point] { point->passed.WaitForNotification(); });
}

void AsyncCpuDevice::OrderCallerAfter(EmulatedStream& stream) {
  if (&stream == &CurrentStream()) return;
  auto point = std::make_shared<PointPassed>();
  stream.Enqueue([point] { point->passed.Notify(); });
  Later([point] { point->passed.WaitForNotification(); });
}

void AsyncCpuDevice::UseCommunicationStream(CommLane lane) {
  CurrentStream();  // binds the thread to this device
  bound_stream = &LaneStream(lane);
}

std::shared_ptr<Device::Fence> AsyncCpuDevice::RecordFence() {
  auto point = std::make_shared<PointPassed>();
  Later([point] { point->passed.Notify(); });
  return point;
}

void AsyncCpuDevice::WaitForFence(const Fence* fence) {
  if (fence == nullptr) return;
  // The caller keeps its fence until the wait is issued, not until it runs: as a CUDA
  // event, the point outlives its owner's reference.
  std::shared_ptr<const PointPassed> point = AsPoint(fence)->shared_from_this();
  Later([point] { point->passed.WaitForNotification(); });
}

absl::Status AsyncCpuDevice::WaitForFenceOnHost(const Fence* fence) {
  if (fence != nullptr) AsPoint(fence)->passed.WaitForNotification();
  return status();
}

bool AsyncCpuDevice::FencePassed(const Fence* fence) {
  return fence == nullptr || AsPoint(fence)->passed.HasBeenNotified();
}

absl::Status AsyncCpuDevice::Synchronize() {
  CurrentStream().Drain();
  return status();
}

absl::Status AsyncCpuDevice::status() const {
  absl::MutexLock lock(&mu_);
  return error_;
}

void AsyncCpuDevice::KeepFirstError(absl::Status error) {
  absl::MutexLock lock(&mu_);
  if (error_.ok()) error_ = std::move(error);
}

namespace {

std::string TypeNames(std::initializer_list<ConstTensorRef> values) {
  return absl::StrJoin(values, ", ", [](std::string* out, const ConstTensorRef& value) {
    absl::StrAppend(out, value.null() ? "absent" : ScalarTypeName(value.type()));
  });
}

}  // namespace

void AsyncCpuDevice::RequireSharedType(const char* operation,
                                       std::initializer_list<ConstTensorRef> values) {
  const ConstTensorRef* first = nullptr;
  for (const ConstTensorRef& value : values) {
    if (value.null()) continue;
    if (first == nullptr) first = &value;
    if (value.type() != first->type()) {
      KeepFirstError(absl::InternalError(
          absl::StrCat(operation, ": its values are stored in different types (", TypeNames(values),
                       "); the CUDA device's kernel takes one")));
      return;
    }
  }
}

void AsyncCpuDevice::RequireGemmTypes(const char* operation, ScalarType operands,
                                      std::initializer_list<ConstTensorRef> values) {
  for (const ConstTensorRef& value : values) {
    if (value.null() || value.type() == ScalarType::kFloat32 || value.type() == operands) continue;
    KeepFirstError(absl::InternalError(
        absl::StrCat(operation, ": a value stored in ", ScalarTypeName(value.type()), " with ",
                     ScalarTypeName(operands), " operands (", TypeNames(values),
                     "); the CUDA device's GEMMs take FP32 or the operands' type")));
    return;
  }
}

void AsyncCpuDevice::RequireNormWeights(const char* operation, ConstTensorRef rows,
                                        std::initializer_list<ConstTensorRef> weights) {
  RequireSharedType(operation, weights);
  for (const ConstTensorRef& weight : weights) {
    if (weight.null() || weight.is_float() || weight.type() == rows.type()) continue;
    KeepFirstError(absl::InternalError(
        absl::StrCat(operation, ": weights stored in ", ScalarTypeName(weight.type()),
                     " for rows stored in ", ScalarTypeName(rows.type()),
                     "; the CUDA device's norms take FP32 weights or the rows' type")));
    return;
  }
}

void AsyncCpuDevice::CopyFromHost(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  auto taken = std::make_shared<std::vector<unsigned char>>(
      static_cast<const unsigned char*>(host_src),
      static_cast<const unsigned char*>(host_src) + bytes);
  Later([dst, taken] { std::memcpy(dst, taken->data(), taken->size()); });
}

absl::Status AsyncCpuDevice::CopyToHost(void* host_dst, const void* src, size_t bytes) {
  Later([this, host_dst, src, bytes] { (void)cpu_.CopyToHost(host_dst, src, bytes); });
  return Synchronize();
}

void AsyncCpuDevice::Copy(void* dst, const void* src, size_t bytes) {
  Later([this, dst, src, bytes] { cpu_.Copy(dst, src, bytes); });
}

void AsyncCpuDevice::Zero(void* dst, size_t bytes) {
  Later([this, dst, bytes] { cpu_.Zero(dst, bytes); });
}

void AsyncCpuDevice::Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) {
  Later([=] { cpu_.Narrow(type, in, out, n); });
}

void AsyncCpuDevice::Widen(ScalarType type, const uint16_t* in, float* out, size_t n) {
  Later([=] { cpu_.Widen(type, in, out, n); });
}

void AsyncCpuDevice::RoundToPrecision(ScalarType type, float* data, size_t n) {
  Later([=] { cpu_.RoundToPrecision(type, data, n); });
}

void AsyncCpuDevice::Accumulate(TensorRef dst, ConstTensorRef src, size_t n) {
  RequireSharedType("Accumulate", {dst, src});
  Later([=] { cpu_.Accumulate(dst, src, n); });
}

void AsyncCpuDevice::Multiply(float* data, size_t n, float factor) {
  Later([=] { cpu_.Multiply(data, n, factor); });
}

void AsyncCpuDevice::Divide(float* data, size_t n, float divisor) {
  Later([=] { cpu_.Divide(data, n, divisor); });
}

absl::StatusOr<bool> AsyncCpuDevice::MultiplyAndCheckFinite(float* data, size_t n, float factor) {
  auto found = std::make_shared<bool>(false);
  Later([=] { *found = *cpu_.MultiplyAndCheckFinite(data, n, factor); });
  RETURN_IF_ERROR(Synchronize());
  return *found;
}

void AsyncCpuDevice::AddSquaredNorm(const float* data, size_t n, double* sum) {
  Later([=] { cpu_.AddSquaredNorm(data, n, sum); });
}

void AsyncCpuDevice::DoubleToFloat(const double* in, float* out, size_t n) {
  Later([=] { cpu_.DoubleToFloat(in, out, n); });
}

void AsyncCpuDevice::ClipToNorm(float* data, size_t n, const float* squared_norm, double max_norm,
                                ScalarType values) {
  Later([=] { cpu_.ClipToNorm(data, n, squared_norm, max_norm, values); });
}

void AsyncCpuDevice::LinearForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b,
                                   int64_t batch, int64_t in, int64_t out, TensorRef y,
                                   ScalarType operands) {
  RequireGemmTypes("LinearForward", operands, {x, w, y});
  Later([=] { cpu_.LinearForward(x, w, b, batch, in, out, y, operands); });
}

void AsyncCpuDevice::LinearBackward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef dy,
                                    int64_t batch, int64_t in, int64_t out, TensorRef dx, float* dw,
                                    float* db, ScalarType operands) {
  RequireGemmTypes("LinearBackward", operands, {x, w, dy, dx});
  Later([=] { cpu_.LinearBackward(x, w, dy, batch, in, out, dx, dw, db, operands); });
}

void AsyncCpuDevice::ActivationForward(v1::Activation act, ConstTensorRef x, size_t n,
                                       TensorRef y) {
  RequireSharedType("ActivationForward", {x, y});
  Later([=] { cpu_.ActivationForward(act, x, n, y); });
}

void AsyncCpuDevice::ActivationBackward(v1::Activation act, ConstTensorRef x, ConstTensorRef dy,
                                        size_t n, TensorRef dx) {
  RequireSharedType("ActivationBackward", {x, dy, dx});
  Later([=] { cpu_.ActivationBackward(act, x, dy, n, dx); });
}

void AsyncCpuDevice::EmbeddingForward(ConstTensorRef table, const int64_t* ids, int64_t n,
                                      int64_t dim, TensorRef out) {
  Later([=] { cpu_.EmbeddingForward(table, ids, n, dim, out); });
}

void AsyncCpuDevice::EmbeddingBackward(const int64_t* ids, ConstTensorRef dout, int64_t n,
                                       int64_t dim, float* dtable) {
  Later([=] { cpu_.EmbeddingBackward(ids, dout, n, dim, dtable); });
}

void AsyncCpuDevice::LayerNormForward(ConstTensorRef x, ConstTensorRef w, ConstTensorRef b,
                                      int64_t rows, int64_t dim, float eps, TensorRef y,
                                      float* mean, float* rstd) {
  RequireSharedType("LayerNormForward", {x, y});
  RequireNormWeights("LayerNormForward", x, {w, b});
  Later([=] { cpu_.LayerNormForward(x, w, b, rows, dim, eps, y, mean, rstd); });
}

void AsyncCpuDevice::LayerNormBackward(ConstTensorRef x, ConstTensorRef w, const float* mean,
                                       const float* rstd, ConstTensorRef dy, int64_t rows,
                                       int64_t dim, TensorRef dx, float* dw, float* db) {
  RequireSharedType("LayerNormBackward", {x, dy, dx});
  RequireNormWeights("LayerNormBackward", x, {w});
  Later([=] { cpu_.LayerNormBackward(x, w, mean, rstd, dy, rows, dim, dx, dw, db); });
}

void AsyncCpuDevice::RmsNormForward(ConstTensorRef x, ConstTensorRef w, int64_t rows, int64_t dim,
                                    float eps, TensorRef y, float* rstd) {
  RequireSharedType("RmsNormForward", {x, y});
  RequireNormWeights("RmsNormForward", x, {w});
  Later([=] { cpu_.RmsNormForward(x, w, rows, dim, eps, y, rstd); });
}

void AsyncCpuDevice::RmsNormBackward(ConstTensorRef x, ConstTensorRef w, const float* rstd,
                                     ConstTensorRef dy, int64_t rows, int64_t dim, TensorRef dx,
                                     float* dw) {
  RequireSharedType("RmsNormBackward", {x, dy, dx});
  RequireNormWeights("RmsNormBackward", x, {w});
  Later([=] { cpu_.RmsNormBackward(x, w, rstd, dy, rows, dim, dx, dw); });
}

void AsyncCpuDevice::Rotary(TensorRef x, const float* cos, const float* sin, int64_t rows,
                            int64_t seq, int64_t heads, int64_t head_dim, bool inverse) {
  Later([=] { cpu_.Rotary(x, cos, sin, rows, seq, heads, head_dim, inverse); });
}

void AsyncCpuDevice::PackGroupedQkv(ConstTensorRef q, ConstTensorRef k, ConstTensorRef v,
                                    int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                    TensorRef qkv) {
  RequireSharedType("PackGroupedQkv", {q, k, v, qkv});
  Later([=] { cpu_.PackGroupedQkv(q, k, v, rows, heads, kv_heads, head_dim, qkv); });
}

void AsyncCpuDevice::UnpackGroupedQkvGrad(ConstTensorRef dqkv, int64_t rows, int64_t heads,
                                          int64_t kv_heads, int64_t head_dim, TensorRef dq,
                                          TensorRef dk, TensorRef dv) {
  RequireSharedType("UnpackGroupedQkvGrad", {dq, dk, dv});
  Later([=] { cpu_.UnpackGroupedQkvGrad(dqkv, rows, heads, kv_heads, head_dim, dq, dk, dv); });
}

void AsyncCpuDevice::MultiplyElementwise(ConstTensorRef a, ConstTensorRef b, size_t n,
                                         TensorRef out) {
  RequireSharedType("MultiplyElementwise", {a, b, out});
  Later([=] { cpu_.MultiplyElementwise(a, b, n, out); });
}

void AsyncCpuDevice::AttentionForward(ConstTensorRef qkv, const AttentionShape& shape,
                                      TensorRef out, float* probs, ScalarType operands) {
  RequireGemmTypes("AttentionForward", operands, {qkv, out});
  Later([=] { cpu_.AttentionForward(qkv, shape, out, probs, operands); });
}

void AsyncCpuDevice::AttentionBackward(ConstTensorRef qkv, const float* probs, ConstTensorRef dout,
                                       const AttentionShape& shape, TensorRef dqkv,
                                       ScalarType operands) {
  RequireGemmTypes("AttentionBackward", operands, {qkv, dout, dqkv});
  Later([=] { cpu_.AttentionBackward(qkv, probs, dout, shape, dqkv, operands); });
}

// The spans are copied into the work (they hold pointers, not the values).
void AsyncCpuDevice::FusedAttentionForward(const QkvSpan<ConstTensorRef>& qkv,
                                           const AttentionShape& shape, TensorRef out, float* lse,
                                           ScalarType operands) {
  RequireGemmTypes("FusedAttentionForward", operands, {qkv.q, qkv.k, qkv.v, out});
  RequireSharedType("FusedAttentionForward", {qkv.q, qkv.k, qkv.v, out});
  Later([=] { cpu_.FusedAttentionForward(qkv, shape, out, lse, operands); });
}

void AsyncCpuDevice::FusedAttentionBackward(const QkvSpan<ConstTensorRef>& qkv, ConstTensorRef out,
                                            const float* lse, ConstTensorRef dout,
                                            const AttentionShape& shape,
                                            const QkvSpan<TensorRef>& dqkv, ScalarType operands) {
  RequireGemmTypes("FusedAttentionBackward", operands,
                   {qkv.q, qkv.k, qkv.v, out, dout, dqkv.q, dqkv.k, dqkv.v});
  RequireSharedType("FusedAttentionBackward", {qkv.q, qkv.k, qkv.v, out, dout});
  RequireSharedType("FusedAttentionBackward", {dqkv.q, dqkv.k, dqkv.v});
  Later([=] { cpu_.FusedAttentionBackward(qkv, out, lse, dout, shape, dqkv, operands); });
}

void AsyncCpuDevice::CrossEntropy(ConstTensorRef logits, const int64_t* labels, int64_t batch,
                                  int64_t classes, float scale, TensorRef dlogits, double* loss) {
  RequireSharedType("CrossEntropy", {logits, dlogits});
  Later([=] { cpu_.CrossEntropy(logits, labels, batch, classes, scale, dlogits, loss); });
}

void AsyncCpuDevice::MeanSquaredError(ConstTensorRef pred, ConstTensorRef target, int64_t batch,
                                      int64_t out, float scale, TensorRef dpred, double* loss) {
  RequireSharedType("MeanSquaredError", {pred, dpred});
  Later([=] { cpu_.MeanSquaredError(pred, target, batch, out, scale, dpred, loss); });
}

void AsyncCpuDevice::SgdUpdate(const SgdScalars& s, bool first, float* param, const float* grad,
                               float* momentum, size_t n) {
  Later([=] { cpu_.SgdUpdate(s, first, param, grad, momentum, n); });
}

void AsyncCpuDevice::AdamWUpdate(const AdamWScalars& s, float* param, const float* grad,
                                 float* exp_avg, float* exp_avg_sq, size_t n) {
  Later([=] { cpu_.AdamWUpdate(s, param, grad, exp_avg, exp_avg_sq, n); });
}

}  // namespace shardwise::testing
