// The epilogue decisions (gemm_epilogue.h), without a GPU: which GELU a measurement shows,
// and which Linear forwards the GEMM can finish itself.

#include "worker/cuda/gemm_epilogue.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/float_math.h"
#include "worker/compute/pointwise.h"

namespace shardwise::cuda {
namespace {

// What the probe feeds the epilogue: [-4, 4] in steps of 1/64.
std::vector<float> ProbeInputs() {
  std::vector<float> x(513);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) / 64.0f - 4.0f;
  return x;
}

template <typename Formula>
std::vector<float> Outputs(const std::vector<float>& x, Formula formula) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(formula(double{x[i]}));
  return y;
}

TEST(FitGelu, TellsTheErfFormFromTheTanhApproximation) {
  const std::vector<float> x = ProbeInputs();
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, Outputs(x, pointwise::Gelu)).formula, GeluFormula::kErf);
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, Outputs(x, pointwise::GeluTanh)).formula,
            GeluFormula::kTanh);
}

TEST(FitGelu, TellsTheDerivativesApart) {
  const std::vector<float> x = ProbeInputs();
  EXPECT_EQ(FitGelu(GeluPart::kDerivative, x, Outputs(x, pointwise::GeluGrad)).formula,
            GeluFormula::kErf);
  EXPECT_EQ(FitGelu(GeluPart::kDerivative, x, Outputs(x, pointwise::GeluTanhGrad)).formula,
            GeluFormula::kTanh);
  // A derivative is not a value, nor the other way round.
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, Outputs(x, pointwise::GeluTanhGrad)).formula,
            GeluFormula::kUnknown);
  EXPECT_EQ(FitGelu(GeluPart::kDerivative, x, Outputs(x, pointwise::GeluTanh)).formula,
            GeluFormula::kUnknown);
  // The device's float derivative (float_math.h) is the erf form's.
  const auto derivative = [](double v) { return float_math::GeluGradF(static_cast<float>(v)); };
  EXPECT_EQ(FitGelu(GeluPart::kDerivative, x, Outputs(x, derivative)).formula, GeluFormula::kErf);
}

TEST(FitGelu, AcceptsFloatArithmetic) {
  // The device's own float GELU (float_math.h), within 2e-7 of the erf form.
  const std::vector<float> x = ProbeInputs();
  const auto gelu = [](double v) { return float_math::GeluF(static_cast<float>(v)); };
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, Outputs(x, gelu)).formula, GeluFormula::kErf);
}

// A formula whose tanh (or erf) errs as a hardware tanh does (tanh.approx.f32: up to 2^-11
// relative), by a pseudo-random amount at each input: `form(x, error)` with error's
// relative error in the tanh (or erf).
template <typename Form>
std::vector<float> WithFastTanh(const std::vector<float>& x, Form form) {
  std::vector<float> y(x.size());
  uint32_t state = 12345;
  for (size_t i = 0; i < x.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const double error = std::ldexp(static_cast<double>(state) / 4294967296.0 * 2 - 1, -11);
    y[i] = static_cast<float>(form(double{x[i]}, error));
  }
  return y;
}

double TanhOf(double x) {
  return std::tanh(pointwise::kSqrt2OverPi * (x + pointwise::kGeluTanhCubic * x * x * x));
}

// Errors up to 1e-3 where the forms differ by 4.7e-4 (8e-4 in derivative): the largest
// error cannot tell them apart, the share of their difference can; and the error stays
// the measure of what may be fused.
TEST(FitGelu, TellsTheFormsApartThroughAFastTanhsError) {
  const std::vector<float> x = ProbeInputs();
  const GeluFit tanh = FitGelu(GeluPart::kValue, x, WithFastTanh(x, [](double v, double e) {
                                 return 0.5 * v * (1.0 + TanhOf(v) * (1 + e));
                               }));
  EXPECT_EQ(tanh.formula, GeluFormula::kTanh) << DescribeGeluFit(tanh);
  EXPECT_GT(tanh.tanh_error, 1e-4);
  EXPECT_NEAR(tanh.erf_share, 0.0, 0.3);
  const GeluFit derivative =
      FitGelu(GeluPart::kDerivative, x, WithFastTanh(x, [](double v, double e) {
                const double t = TanhOf(v) * (1 + e);
                const double inner =
                    pointwise::kSqrt2OverPi * (1.0 + 3.0 * pointwise::kGeluTanhCubic * v * v);
                return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * inner;
              }));
  EXPECT_EQ(derivative.formula, GeluFormula::kTanh) << DescribeGeluFit(derivative);
  const GeluFit erf = FitGelu(GeluPart::kValue, x, WithFastTanh(x, [](double v, double e) {
                                return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)) * (1 + e));
                              }));
  EXPECT_EQ(erf.formula, GeluFormula::kErf) << DescribeGeluFit(erf);
  EXPECT_NEAR(erf.erf_share, 1.0, 0.3);
  // Too far from float arithmetic to fuse for FP32 or FP16 outputs.
  EXPECT_EQ(DescribeGeluFusion(tanh, derivative).find("FP32"), std::string::npos)
      << DescribeGeluFusion(tanh, derivative);
  std::printf("fast tanh: %s\nderivative: %s\nerf: %s\n", DescribeGeluFit(tanh).c_str(),
              DescribeGeluFit(derivative).c_str(), DescribeGeluFit(erf).c_str());
}

// A tanh off by a steady fraction of itself (a bias, not noise) moves the outputs along
// a shape of its own, which alone would look like a share of the erf form's difference
// (0.76 for a bias of 2^-12): fitted beside it, the share stays the tanh form's.
TEST(FitGelu, ATanhsSteadyBiasIsNotTakenForTheOtherForm) {
  const std::vector<float> x = ProbeInputs();
  for (const double bias : {std::ldexp(1.0, -12), -std::ldexp(1.0, -11)}) {
    const auto value = [bias](double v) { return 0.5 * v * (1.0 + TanhOf(v) * (1 + bias)); };
    const auto derivative = [bias](double v) {
      const double t = TanhOf(v) * (1 + bias);
      const double inner =
          pointwise::kSqrt2OverPi * (1.0 + 3.0 * pointwise::kGeluTanhCubic * v * v);
      return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * inner;
    };
    const GeluFit fit_value = FitGelu(GeluPart::kValue, x, Outputs(x, value));
    EXPECT_EQ(fit_value.formula, GeluFormula::kTanh) << bias << ": " << DescribeGeluFit(fit_value);
    EXPECT_NEAR(fit_value.erf_share, 0.0, 0.05) << bias;
    const GeluFit fit_derivative = FitGelu(GeluPart::kDerivative, x, Outputs(x, derivative));
    EXPECT_EQ(fit_derivative.formula, GeluFormula::kTanh)
        << bias << ": " << DescribeGeluFit(fit_derivative);
    EXPECT_NEAR(fit_derivative.erf_share, 0.0, 0.05) << bias;
  }
}

TEST(FitGelu, RefusesWhatIsNeitherForm) {
  const std::vector<float> x = ProbeInputs();
  // The GEMM's input, unchanged (an epilogue that did nothing), and the bias forgotten
  // (every output off by a constant).
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, x).formula, GeluFormula::kUnknown);
  std::vector<float> shifted = Outputs(x, pointwise::GeluTanh);
  for (float& y : shifted) y += 0.01f;
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, shifted).formula, GeluFormula::kUnknown);
  // Halfway between the forms: within reach of neither.
  const std::vector<float> erf = Outputs(x, pointwise::Gelu);
  const std::vector<float> tanh = Outputs(x, pointwise::GeluTanh);
  std::vector<float> between(x.size());
  for (size_t i = 0; i < x.size(); ++i) between[i] = 0.5f * (erf[i] + tanh[i]);
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, between).formula, GeluFormula::kUnknown);
  // One NaN spoils a measurement.
  std::vector<float> with_nan = tanh;
  with_nan[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, with_nan).formula, GeluFormula::kUnknown);
  // Nothing measured, or mismatched spans.
  EXPECT_EQ(FitGelu(GeluPart::kValue, {}, {}).formula, GeluFormula::kUnknown);
  EXPECT_EQ(FitGelu(GeluPart::kValue, x, absl::MakeConstSpan(tanh).subspan(1)).formula,
            GeluFormula::kUnknown);
}

TEST(FitGelu, ReportsTheErrorsItJudgedBy) {
  const std::vector<float> x = ProbeInputs();
  const GeluFit tanh = FitGelu(GeluPart::kValue, x, Outputs(x, pointwise::GeluTanh));
  EXPECT_LT(tanh.tanh_error, 1e-7);  // the outputs' rounding to float
  // The forms' largest difference on the probe's grid (near x = -2.7).
  EXPECT_GT(tanh.erf_error, 4e-4);
  EXPECT_LT(tanh.erf_error, 5e-4);
  EXPECT_THAT(DescribeGeluFit(tanh), testing::HasSubstr("the tanh approximation"));
  EXPECT_THAT(DescribeGeluFit(tanh), testing::HasSubstr("largest error 0.00047 against the erf"));
  EXPECT_NEAR(tanh.erf_share, 0.0, 1e-3);
  // Nothing measured: infinite errors, and the reason in place of a verdict.
  GeluFit refused = FitGelu(GeluPart::kValue, {}, {});
  EXPECT_EQ(refused.erf_error, HUGE_VAL);
  EXPECT_EQ(refused.tanh_error, HUGE_VAL);
  refused.unmeasured = "cuBLASLt has no algorithm for it";
  EXPECT_EQ(DescribeGeluFit(refused), "not measured: cuBLASLt has no algorithm for it");
}

TEST(FusedActivation, NamesTheJobsActivationOfEachForm) {
  EXPECT_EQ(FusedActivation(GeluFormula::kErf), v1::GELU);
  EXPECT_EQ(FusedActivation(GeluFormula::kTanh), v1::GELU_TANH);
  EXPECT_EQ(FusedActivation(GeluFormula::kUnknown), v1::ACTIVATION_UNSPECIFIED);
}

LinearEpilogueQuery Gelu16(ScalarType type) {
  LinearEpilogueQuery query;
  query.activation = v1::GELU_TANH;
  query.bias = true;
  query.operands = query.pre = query.output = type;
  query.out = 3072;
  query.epilogue_gelu = v1::GELU_TANH;
  query.epilogue_gelu_error = 2e-7;  // float arithmetic on the formula
  return query;
}

TEST(ChooseLinearEpilogue, AddsTheBiasOfEveryPlainLinear) {
  LinearEpilogueQuery query;
  query.bias = true;
  EXPECT_EQ(ChooseLinearEpilogue(query), LinearEpilogue::kBias);
  query.bias = false;
  EXPECT_EQ(ChooseLinearEpilogue(query), LinearEpilogue::kNone);
  // Whatever the types and shape: a bias needs no activation's rules.
  query.bias = true;
  query.operands = ScalarType::kBFloat16;
  query.out = 3;
  EXPECT_EQ(ChooseLinearEpilogue(query), LinearEpilogue::kBias);
}

TEST(ChooseLinearEpilogue, FusesTheGeluTheEpilogueComputes) {
  for (ScalarType type : {ScalarType::kFloat32, ScalarType::kBFloat16, ScalarType::kFloat16}) {
    EXPECT_EQ(ChooseLinearEpilogue(Gelu16(type)), LinearEpilogue::kGeluAuxBias)
        << ScalarTypeName(type);
    LinearEpilogueQuery no_bias = Gelu16(type);
    no_bias.bias = false;
    EXPECT_EQ(ChooseLinearEpilogue(no_bias), LinearEpilogue::kGeluAux) << ScalarTypeName(type);
  }
  LinearEpilogueQuery erf = Gelu16(ScalarType::kBFloat16);
  erf.activation = erf.epilogue_gelu = v1::GELU;
  EXPECT_EQ(ChooseLinearEpilogue(erf), LinearEpilogue::kGeluAuxBias);
}

TEST(ChooseLinearEpilogue, RunsUnfusedWhatTheEpilogueCannotDo) {
  // Another formula than the epilogue's, or none measured.
  LinearEpilogueQuery other = Gelu16(ScalarType::kBFloat16);
  other.activation = v1::GELU;
  EXPECT_EQ(ChooseLinearEpilogue(other), std::nullopt);
  other.epilogue_gelu = v1::ACTIVATION_UNSPECIFIED;
  EXPECT_EQ(ChooseLinearEpilogue(other), std::nullopt);
  // Activations it has no form of.
  for (v1::Activation act : {v1::RELU, v1::SILU}) {
    LinearEpilogueQuery query = Gelu16(ScalarType::kBFloat16);
    query.activation = act;
    EXPECT_EQ(ChooseLinearEpilogue(query), std::nullopt) << v1::Activation_Name(act);
  }
  // FP32 storage of BF16 values: rounded between the GEMM and the activation.
  LinearEpilogueQuery fp32_storage = Gelu16(ScalarType::kBFloat16);
  fp32_storage.pre = fp32_storage.output = ScalarType::kFloat32;
  EXPECT_EQ(ChooseLinearEpilogue(fp32_storage), std::nullopt);
  // The kept input in another type than y.
  LinearEpilogueQuery mixed = Gelu16(ScalarType::kBFloat16);
  mixed.pre = ScalarType::kFloat32;
  EXPECT_EQ(ChooseLinearEpilogue(mixed), std::nullopt);
  // Columns cuBLASLt cannot lead its kept input with.
  for (int64_t out : {0, 12, 3070}) {
    LinearEpilogueQuery query = Gelu16(ScalarType::kBFloat16);
    query.out = out;
    EXPECT_EQ(ChooseLinearEpilogue(query), std::nullopt) << out;
  }
}

// An epilogue whose GELU errs by more than float arithmetic does (a fast tanh, say) is not
// fused for FP32 outputs, where PyTorch's GELU is exact to a few roundings; in 16 bits it
// is, while its error stays well under the output's rounding.
TEST(ChooseLinearEpilogue, FusesOnlyAGeluAsAccurateAsTheOutputNeeds) {
  LinearEpilogueQuery fp32 = Gelu16(ScalarType::kFloat32);
  fp32.epilogue_gelu_error = 5e-5;
  EXPECT_EQ(ChooseLinearEpilogue(fp32), std::nullopt);
  EXPECT_EQ(ChooseInputGradEpilogue(fp32), std::nullopt);
  fp32.epilogue_gelu_error = 5e-7;
  EXPECT_EQ(ChooseLinearEpilogue(fp32), LinearEpilogue::kGeluAuxBias);
  LinearEpilogueQuery bf16 = Gelu16(ScalarType::kBFloat16);
  bf16.epilogue_gelu_error = 5e-5;
  EXPECT_EQ(ChooseLinearEpilogue(bf16), LinearEpilogue::kGeluAuxBias);
  bf16.epilogue_gelu_error = 2e-3;  // past BF16's own rounding
  EXPECT_EQ(ChooseLinearEpilogue(bf16), std::nullopt);
  LinearEpilogueQuery fp16 = Gelu16(ScalarType::kFloat16);
  fp16.epilogue_gelu_error = 5e-5;
  EXPECT_EQ(ChooseLinearEpilogue(fp16), LinearEpilogue::kGeluAuxBias);
  fp16.epilogue_gelu_error = 3e-4;
  EXPECT_EQ(ChooseLinearEpilogue(fp16), std::nullopt);
  EXPECT_DOUBLE_EQ(FittedError(GeluFit{GeluFormula::kTanh, 1e-3, 2e-7, ""}), 2e-7);
  EXPECT_DOUBLE_EQ(FittedError(GeluFit{GeluFormula::kErf, 3e-7, 1e-3, ""}), 3e-7);
  EXPECT_EQ(FittedError(GeluFit{}), HUGE_VAL);
  // What the worker logs of it.
  EXPECT_EQ(DescribeGeluFusion(GeluFit{GeluFormula::kTanh, 1e-3, 2e-7, ""},
                               GeluFit{GeluFormula::kTanh, 1e-3, 5e-5, ""}),
            "value fused for FP32, BF16, FP16; derivative for BF16, FP16");
  EXPECT_EQ(DescribeGeluFusion(GeluFit{}, GeluFit{GeluFormula::kErf, 2e-4, 1e-3, ""}),
            "value fused for none; derivative for BF16");
}

TEST(ChooseInputGradEpilogue, DifferentiatesTheGeluTheEpilogueComputes) {
  // The input gradient's columns are the kept input's: `out` here is the Linear's `in`.
  for (ScalarType type : {ScalarType::kFloat32, ScalarType::kBFloat16, ScalarType::kFloat16}) {
    LinearEpilogueQuery query = Gelu16(type);
    EXPECT_EQ(ChooseInputGradEpilogue(query), LinearEpilogue::kDGelu) << ScalarTypeName(type);
    query.bias = false;  // the bias is the other Linear's business
    EXPECT_EQ(ChooseInputGradEpilogue(query), LinearEpilogue::kDGelu) << ScalarTypeName(type);
  }
  // Under the forward's rules: another formula, FP32 storage of 16-bit values, mixed types,
  // columns not a multiple of 8, and no activation at all.
  LinearEpilogueQuery other = Gelu16(ScalarType::kBFloat16);
  other.activation = v1::GELU;
  LinearEpilogueQuery fp32_storage = Gelu16(ScalarType::kBFloat16);
  fp32_storage.pre = fp32_storage.output = ScalarType::kFloat32;
  LinearEpilogueQuery mixed = Gelu16(ScalarType::kBFloat16);
  mixed.output = ScalarType::kFloat32;
  LinearEpilogueQuery narrow = Gelu16(ScalarType::kBFloat16);
  narrow.out = 20;
  LinearEpilogueQuery none = Gelu16(ScalarType::kFloat32);
  none.activation = v1::ACTIVATION_UNSPECIFIED;
  for (const LinearEpilogueQuery* query : {&other, &fp32_storage, &mixed, &narrow, &none}) {
    EXPECT_EQ(ChooseInputGradEpilogue(*query), std::nullopt);
  }
}

}  // namespace
}  // namespace shardwise::cuda
