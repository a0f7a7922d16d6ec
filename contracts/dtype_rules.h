#ifndef SHARDWISE_CONTRACTS_DTYPE_RULES_H_
#define SHARDWISE_CONTRACTS_DTYPE_RULES_H_

// FSDP MixedPrecision's dtype rules (docs/semantics.md, "Mixed precision"), shared by the
// coordinator (validation, describe) and the workers (the runtime's casts).

#include "proto/job_spec.pb.h"

namespace shardwise {

// Parameters are always stored in FP32 (the sharded master copy).
inline constexpr v1::Dtype kParameterDtype = v1::FP32;

// The dtype of unsharded parameters in compute and of the all-gather.
v1::Dtype EffectiveParamDtype(const v1::MixedPrecision& mp);

// The dtype of gradient reduction: reduce_dtype if set, else param_dtype if set, else
// the parameter's dtype.
v1::Dtype EffectiveReduceDtype(const v1::MixedPrecision& mp);

// The dtype of the gradients the optimizer sees after reduction: the parameter's dtype
// unless keep_low_precision_grads keeps them in param_dtype.
v1::Dtype ReducedGradientDtype(const v1::MixedPrecision& mp);

int DtypeSizeBytes(v1::Dtype dtype);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_DTYPE_RULES_H_
