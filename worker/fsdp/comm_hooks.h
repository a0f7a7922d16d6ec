#ifndef SHARDWISE_WORKER_FSDP_COMM_HOOKS_H_
#define SHARDWISE_WORKER_FSDP_COMM_HOOKS_H_

// How one FSDP unit's gradient is reduced: FSDP's own path and the communication hooks
// (docs/semantics.md: "Gradient reduction (no communication hook)", "Communication
// hooks"). Which hook applies where:
//   NO_HOOK                   FSDP's reduction: reduce_dtype, pre/post divide factors,
//                             reduce-scatter in the shard group, all-reduce across the
//                             replicate group.
//   FP16/BF16_COMPRESS on a   FSDP's low-precision hooks: the gradient is cast to the
//   sharded strategy          hook's dtype (instead of reduce_dtype), reduce-scattered with
//                             the divide factors, and cast back to FP32.
//   ALLREDUCE, FP16/BF16_     DDP's hooks, on NO_SHARD (every rank holds the whole
//   COMPRESS, the wrappers    gradient: one unit is one bucket): the bucket is divided by N
//                             and all-reduced, in the hook's dtype. The bucket is the
//                             gradient in reduce_dtype, but for the compress hooks, which
//                             FSDP gives the gradient in param_dtype (their cast replaces
//                             reduce_dtype's).
// keep_low_precision_grads rounds every result but the mixed-precision hook's to param_dtype.
//   MIXED_PRECISION           DDP's mixed-precision hook on NO_SHARD: all-reduce in
//                             reduce_dtype without dividing, then (on another thread, see
//                             FsdpModel) divide by N and upcast to FP32.
//
// Every low-precision value is stored as its 16-bit pattern and every arithmetic step
// rounds to the dtype it runs in, as PyTorch's CPU kernels do (compute in FP32, round the
// result once). Buffers are the device's; the arithmetic runs on the calling thread's
// stream (compute/device.h).

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "contracts/fsdp_layout.h"
#include "proto/job_spec.pb.h"
#include "worker/comm/communicator.h"
#include "worker/compute/device.h"
#include "worker/runtime/memory.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::fsdp {

struct Groups {
  Communicator* shard = nullptr;      // this rank's shard group (size plan.shard_size)
  Communicator* replicate = nullptr;  // this rank's replicate group (size plan.replicate_size)
  // The shard group again, over its own connection, for all-gathers on their own thread
  // (FSDP's unshard stream) beside the reductions; null: all-gathers share the reduction
  // thread and `shard`.
  Communicator* unshard = nullptr;
};

// Where and in which dtypes a unit's gradient is reduced.
struct ReductionContext {
  const ShardingPlan* plan = nullptr;
  Groups groups;
  Device* device = nullptr;
  ScalarType param_type = ScalarType::kFloat32;   // the dtype of the gradient's values
  ScalarType reduce_type = ScalarType::kFloat32;  // MixedPrecision's effective reduce_dtype
  bool keep_low_precision_grads = false;
};

// A gradient bucket: a flat vector of one dtype, as DDP hands to a communication hook.
class Bucket {
 public:
  // A copy of `values` (FP32 storage) cast to `type`.
  static Bucket FromFloat(Device* device, const float* values, int64_t numel, ScalarType type);
  Bucket CastTo(ScalarType type) const;         // tensor.to(type)
  void CopyFrom(const Bucket& other);           // tensor.copy_(other): casts into this dtype
  void ToFloat(float* out) const;               // widens into FP32 storage
  void DivideBy(double divisor);                // tensor.div_(divisor), rounded to this dtype
  absl::Status AllReduce(Communicator& group);  // SUM, in this dtype
  // Chunk `group.rank()` of the SUM over the group (this bucket is working space).
  absl::StatusOr<Bucket> ReduceScatter(Communicator& group);

  ScalarType type() const { return data_.type(); }
  int64_t numel() const { return static_cast<int64_t>(data_.numel()); }

 private:
  Bucket(Device* device, Buffer data) : device_(device), data_(std::move(data)) {}
  Device* device_;
  Buffer data_;
};

// Whether the reduction's collectives (the shard and replicate groups') have all
// completed; an error (the first) only once every group has settled, so that a failure in
// one never leaves the other's in flight unwatched (its watchdog runs in its poll): the
// completion poll of a reduction task (fenced_tasks.h).
absl::StatusOr<bool> ReductionCollectivesCompleted(const Groups& groups);

// Reduces a unit's unsharded gradient `grad` [plan.shard_size * shard_numel] (FP32
// storage of param_type values; working space, undefined afterwards) into `reduced`
// [shard_numel], in FP32 (or FP32 storage of param_type values with
// keep_low_precision_grads). For every hook but MIXED_PRECISION, which FsdpModel runs
// as its two halves below. Where ReducesInPlace(plan), `reduced` may be `grad`: FSDP's
// reduction then runs no collective (on one rank they are identities) and rounds the
// values in place, to the same bits.
absl::Status ReduceUnitGradient(const v1::CommHook& hook, const ReductionContext& context,
                                float* grad, int64_t shard_numel, float* reduced);

// DDP's mixed-precision hook, first half (the training thread): the bucket in
// reduce_dtype, all-reduced without any division.
absl::StatusOr<Bucket> MixedPrecisionAllReduce(const ReductionContext& context, const float* grad,
                                               int64_t numel);
// Second half (the upcast thread): divide by N in the bucket's dtype, copy into the
// param_dtype gradient, and upcast it into `reduced` (FP32) for the optimizer.
void MixedPrecisionFinish(const ReductionContext& context, Bucket& bucket, float* reduced);

// One rank in all: its shard and replicate groups are itself, and a gradient may be
// reduced in place (ReduceUnitGradient).
inline bool ReducesInPlace(const ShardingPlan& plan) {
  return plan.shard_size == 1 && plan.replicate_size == 1;
}

// True for the hooks whose reduction FsdpModel splits across threads.
inline bool IsMixedPrecisionHook(const v1::CommHook& hook) {
  return hook.hook() == v1::CommHook::MIXED_PRECISION;
}

}  // namespace shardwise::fsdp

#endif  // SHARDWISE_WORKER_FSDP_COMM_HOOKS_H_
