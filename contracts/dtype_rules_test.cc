#include "contracts/dtype_rules.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::MixedPrecision Mp(v1::Dtype param, v1::Dtype reduce, bool keep = false) {
  v1::MixedPrecision mp;
  mp.set_param_dtype(param);
  mp.set_reduce_dtype(reduce);
  mp.set_keep_low_precision_grads(keep);
  return mp;
}

TEST(DtypeRules, ReduceDtypeFollowsParamDtypeWhenUnset) {
  EXPECT_EQ(EffectiveReduceDtype(Mp(v1::DTYPE_UNSPECIFIED, v1::DTYPE_UNSPECIFIED)), v1::FP32);
  EXPECT_EQ(EffectiveReduceDtype(Mp(v1::BF16, v1::DTYPE_UNSPECIFIED)), v1::BF16);
  EXPECT_EQ(EffectiveReduceDtype(Mp(v1::FP16, v1::FP32)), v1::FP32);
  EXPECT_EQ(EffectiveReduceDtype(Mp(v1::DTYPE_UNSPECIFIED, v1::FP16)), v1::FP16);
}

TEST(DtypeRules, ParamDtypeDefaultsToParameterDtype) {
  EXPECT_EQ(EffectiveParamDtype(Mp(v1::DTYPE_UNSPECIFIED, v1::BF16)), v1::FP32);
  EXPECT_EQ(EffectiveParamDtype(Mp(v1::FP16, v1::BF16)), v1::FP16);
}

TEST(DtypeRules, ReducedGradientsUpcastUnlessKept) {
  EXPECT_EQ(ReducedGradientDtype(Mp(v1::BF16, v1::DTYPE_UNSPECIFIED)), v1::FP32);
  EXPECT_EQ(ReducedGradientDtype(Mp(v1::BF16, v1::DTYPE_UNSPECIFIED, true)), v1::BF16);
}

TEST(DtypeRules, Sizes) {
  EXPECT_EQ(DtypeSizeBytes(v1::FP32), 4);
  EXPECT_EQ(DtypeSizeBytes(v1::FP16), 2);
  EXPECT_EQ(DtypeSizeBytes(v1::BF16), 2);
}

}  // namespace
}  // namespace shardwise
