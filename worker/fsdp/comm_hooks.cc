#include "worker/fsdp/comm_hooks.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardwise::fsdp {
namespace {

ScalarType CompressType(v1::CommHook::Hook hook) {
  return hook == v1::CommHook::BF16_COMPRESS ? ScalarType::kBFloat16 : ScalarType::kFloat16;
}

ScalarType WrapperType(v1::CommHook::Wrapper wrapper) {
  return wrapper == v1::CommHook::BF16_WRAPPER ? ScalarType::kBFloat16 : ScalarType::kFloat16;
}

void DivideInPlace(Device* device, float* data, int64_t n, double divisor) {
  if (divisor == 1) return;
  device->Divide(data, n, static_cast<float>(divisor));
}

// Divides in FP32 and rounds the quotient to `type`, as a 16-bit bucket's DivideBy does.
void DivideAndRound(Device* device, ScalarType type, float* data, int64_t n, double divisor) {
  if (divisor == 1) return;
  DivideInPlace(device, data, n, divisor);
  if (type != ScalarType::kFloat32) device->RoundToPrecision(type, data, n);
}

// Where HYBRID's replicate all-reduce waits on the host (its group is not stream-ordered:
// the host-staged path), the shard group's reduce-scatter before it completes first,
// under its own watchdog, so a stuck reduce-scatter is reported as itself (not as the
// all-reduce's timeout) and is never left in flight behind a failed all-reduce. Under
// NCCL both are stream-ordered: each has its own deadline, and the reduction's completion
// poll (ReductionCollectivesCompleted) watches both.
absl::Status SettleBeforeReplicate(const ReductionContext& c) {
  if (c.groups.replicate->stream_ordered()) return absl::OkStatus();
  return c.groups.shard->WaitForCollectives();
}

// FsdpReduce on one rank, in place: the reduce-scatter and the all-reduce of a group of
// one are identities, so what is left of the reduction is its rounding points: the cast
// to `reduce_type` (narrowing then widening is that rounding), each division rounded to
// it, and the cast back (exact). The same bits as the collective path, without its three
// copies of the gradient (comm_hooks_test checks both).
void FsdpReduceAlone(const ReductionContext& c, ScalarType reduce_type, float* grad,
                     int64_t numel) {
  if (reduce_type != ScalarType::kFloat32) c.device->RoundToPrecision(reduce_type, grad, numel);
  DivideAndRound(c.device, reduce_type, grad, numel, c.plan->predivide);
  DivideAndRound(c.device, reduce_type, grad, numel, c.plan->postdivide);
}

// FSDP's reduction, and its low-precision hooks, which pass their own dtype as
// `reduce_type`: cast; divide by predivide; reduce-scatter in the shard group; all-reduce
// across the replicate group; divide by postdivide; cast back.
absl::Status FsdpReduce(const ReductionContext& c, ScalarType reduce_type, float* grad,
                        int64_t shard_numel, float* reduced) {
  const ShardingPlan& plan = *c.plan;
  if (grad == reduced) {
    FsdpReduceAlone(c, reduce_type, grad, shard_numel);
    return absl::OkStatus();
  }
  const int64_t padded = shard_numel * plan.shard_size;
  if (reduce_type == ScalarType::kFloat32) {
    // In place, without a bucket copy: FSDP's unsharded gradient is freed right after.
    DivideInPlace(c.device, grad, padded, plan.predivide);
    RETURN_IF_ERROR(c.groups.shard->ReduceScatter(grad, shard_numel, reduced));
    if (plan.replicate_size > 1) {
      RETURN_IF_ERROR(SettleBeforeReplicate(c));
      RETURN_IF_ERROR(c.groups.replicate->AllReduce(reduced, shard_numel));
    }
    DivideInPlace(c.device, reduced, shard_numel, plan.postdivide);
    return absl::OkStatus();
  }
  Bucket full = Bucket::FromFloat(c.device, grad, padded, reduce_type);
  full.DivideBy(plan.predivide);
  ASSIGN_OR_RETURN(Bucket shard, full.ReduceScatter(*c.groups.shard));
  if (plan.replicate_size > 1) {
    RETURN_IF_ERROR(SettleBeforeReplicate(c));
    RETURN_IF_ERROR(shard.AllReduce(*c.groups.replicate));
  }
  shard.DivideBy(plan.postdivide);
  shard.ToFloat(reduced);
  return absl::OkStatus();
}

// DDP's hooks on one bucket (docs/semantics.md, "Communication hooks").
absl::Status AllReduceHook(Communicator& group, Bucket& bucket) {
  bucket.DivideBy(group.size());
  return bucket.AllReduce(group);
}

absl::Status CompressHook(ScalarType low, Communicator& group, Bucket& bucket) {
  Bucket compressed = bucket.CastTo(low);
  compressed.DivideBy(group.size());
  RETURN_IF_ERROR(compressed.AllReduce(group));
  bucket.CopyFrom(compressed);
  return absl::OkStatus();
}

absl::Status RunDdpHook(v1::CommHook::Hook hook, Communicator& group, Bucket& bucket) {
  switch (hook) {
    case v1::CommHook::ALLREDUCE:
      return AllReduceHook(group, bucket);
    case v1::CommHook::FP16_COMPRESS:
    case v1::CommHook::BF16_COMPRESS:
      return CompressHook(CompressType(hook), group, bucket);
    default:
      return absl::InternalError(
          absl::StrCat("comm_hook ", v1::CommHook::Hook_Name(hook), " is not a DDP bucket hook"));
  }
}

// fp16_compress_wrapper / bf16_compress_wrapper: the wrapped hook runs on a low-precision
// copy of the bucket, and its result is copied back.
absl::Status RunWrapped(v1::CommHook::Wrapper wrapper, v1::CommHook::Hook hook, Communicator& group,
                        Bucket& bucket) {
  if (wrapper == v1::CommHook::NO_WRAPPER) return RunDdpHook(hook, group, bucket);
  Bucket low = bucket.CastTo(WrapperType(wrapper));
  RETURN_IF_ERROR(RunDdpHook(hook, group, low));
  bucket.CopyFrom(low);
  return absl::OkStatus();
}

}  // namespace

Bucket Bucket::FromFloat(Device* device, const float* values, int64_t numel, ScalarType type) {
  Buffer data(device->allocator(), numel, MemoryCategory::kCommunication, type, false);
  if (type == ScalarType::kFloat32) {
    device->Copy(data.data(), values, numel * sizeof(float));
  } else {
    device->Narrow(type, values, data.as<uint16_t>(), numel);
  }
  return Bucket(device, std::move(data));
}

void Bucket::ToFloat(float* out) const {
  if (type() == ScalarType::kFloat32) {
    device_->Copy(out, data_.data(), numel() * sizeof(float));
  } else {
    device_->Widen(type(), data_.as<uint16_t>(), out, numel());
  }
}

Bucket Bucket::CastTo(ScalarType type) const {
  if (this->type() == ScalarType::kFloat32) {
    return FromFloat(device_, data_.data(), numel(), type);
  }
  Buffer wide(device_->allocator(), numel(), MemoryCategory::kCommunication, false);
  ToFloat(wide.data());
  return FromFloat(device_, wide.data(), numel(), type);
}

void Bucket::CopyFrom(const Bucket& other) {
  if (other.type() == type()) {
    device_->Copy(data_.as<uint8_t>(), other.data_.as<uint8_t>(), data_.bytes());
    return;
  }
  *this = other.CastTo(type());
}

void Bucket::DivideBy(double divisor) {
  if (divisor == 1) return;
  if (type() == ScalarType::kFloat32) {
    DivideInPlace(device_, data_.data(), numel(), divisor);
    return;
  }
  // A 16-bit division computes in FP32 and rounds the quotient once.
  Buffer wide(device_->allocator(), numel(), MemoryCategory::kCommunication, false);
  ToFloat(wide.data());
  DivideInPlace(device_, wide.data(), numel(), divisor);
  device_->Narrow(type(), wide.data(), data_.as<uint16_t>(), numel());
}

absl::Status Bucket::AllReduce(Communicator& group) {
  return group.AllReduce(data_.as<void>(), numel(), type());
}

absl::StatusOr<Bucket> Bucket::ReduceScatter(Communicator& group) {
  const int64_t shard_numel = numel() / group.size();
  Buffer shard(device_->allocator(), shard_numel, MemoryCategory::kCommunication, type(), false);
  RETURN_IF_ERROR(group.ReduceScatter(data_.as<void>(), shard_numel, shard.as<void>(), type()));
  return Bucket(device_, std::move(shard));
}

absl::Status ReduceUnitGradient(const v1::CommHook& hook, const ReductionContext& context,
                                float* grad, int64_t shard_numel, float* reduced) {
  const ShardingPlan& plan = *context.plan;
  if (IsMixedPrecisionHook(hook)) {
    return absl::InternalError("the mixed-precision hook runs as its two halves");
  }
  if (grad == reduced && !ReducesInPlace(plan)) {
    return absl::InternalError(absl::StrCat("a gradient reduced in place over ", plan.world_size,
                                            " ranks: only one rank can"));
  }
  // FSDP's low-precision hooks (fp16/bf16_compress_hook, not the wrappers) replace
  // reduce_dtype's cast with their own: the gradient reaches them in the parameter's dtype
  // (PyTorch's _low_precision_hook_enabled).
  const bool low_precision_hook =
      hook.wrapper() == v1::CommHook::NO_WRAPPER &&
      (hook.hook() == v1::CommHook::FP16_COMPRESS || hook.hook() == v1::CommHook::BF16_COMPRESS);
  if (hook.hook() == v1::CommHook::NO_HOOK) {
    RETURN_IF_ERROR(FsdpReduce(context, context.reduce_type, grad, shard_numel, reduced));
  } else if (plan.sharded()) {
    RETURN_IF_ERROR(FsdpReduce(context, CompressType(hook.hook()), grad, shard_numel, reduced));
  } else {
    // DDP: every rank holds the whole bucket: the gradient in reduce_dtype, or as it is
    // (FP32 holding param_dtype's values) for a low-precision hook.
    Bucket bucket =
        Bucket::FromFloat(context.device, grad, shard_numel,
                          low_precision_hook ? ScalarType::kFloat32 : context.reduce_type);
    RETURN_IF_ERROR(RunWrapped(hook.wrapper(), hook.hook(), *context.groups.replicate, bucket));
    bucket.ToFloat(reduced);
  }
  // keep_low_precision_grads keeps the reduced gradient in param_dtype; otherwise it is
  // used as FP32 (the parameter's dtype).
  if (context.keep_low_precision_grads) {
    context.device->RoundToPrecision(context.param_type, reduced, shard_numel);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ReductionCollectivesCompleted(const Groups& groups) {
  absl::Status failure;
  bool settled = true;
  for (Communicator* group : {groups.shard, groups.replicate}) {
    if (group == nullptr) continue;
    const absl::StatusOr<bool> completed = group->CollectivesCompleted();
    if (!completed.ok()) {
      if (failure.ok()) failure = completed.status();
    } else if (!*completed) {
      settled = false;
    }
  }
  if (!settled) return false;
  if (!failure.ok()) return failure;
  return true;
}

absl::StatusOr<Bucket> MixedPrecisionAllReduce(const ReductionContext& context, const float* grad,
                                               int64_t numel) {
  Bucket bucket = Bucket::FromFloat(context.device, grad, numel, context.reduce_type);
  RETURN_IF_ERROR(bucket.AllReduce(*context.groups.replicate));
  // The hook's task waits for its work on the host anyway (it has no completion poll to
  // watch a stream-ordered all-reduce): here, under the all-reduce's own watchdog.
  RETURN_IF_ERROR(context.groups.replicate->WaitForCollectives());
  return bucket;
}

void MixedPrecisionFinish(const ReductionContext& context, Bucket& bucket, float* reduced) {
  bucket.DivideBy(context.groups.replicate->size());
  // The reducer copies the bucket into the param_dtype gradients; the hook then upcasts
  // them to FP32.
  bucket.ToFloat(reduced);
  context.device->RoundToPrecision(context.param_type, reduced, bucket.numel());
}

}  // namespace shardwise::fsdp
