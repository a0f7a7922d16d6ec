#include "contracts/dtype_rules.h"

namespace shardwise {

v1::Dtype EffectiveParamDtype(const v1::MixedPrecision& mp) {
  return mp.param_dtype() == v1::DTYPE_UNSPECIFIED ? kParameterDtype : mp.param_dtype();
}

v1::Dtype EffectiveReduceDtype(const v1::MixedPrecision& mp) {
  if (mp.reduce_dtype() != v1::DTYPE_UNSPECIFIED) return mp.reduce_dtype();
  return EffectiveParamDtype(mp);
}

v1::Dtype ReducedGradientDtype(const v1::MixedPrecision& mp) {
  return mp.keep_low_precision_grads() ? EffectiveParamDtype(mp) : kParameterDtype;
}

int DtypeSizeBytes(v1::Dtype dtype) {
  switch (dtype) {
    case v1::FP16:
    case v1::BF16:
      return 2;
    default:
      return 4;
  }
}

}  // namespace shardwise
