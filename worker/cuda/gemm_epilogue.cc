#include "worker/cuda/gemm_epilogue.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/compute/pointwise.h"

namespace shardwise::cuda {
namespace {

// Within FP32's error of a formula (its outputs' rounding and the epilogue's float
// arithmetic), against the two forms' largest difference (4.7e-4 in value, 8e-4 in
// derivative, relative to 1 + |y|): a verdict needs the other form at least twice this
// far off.
constexpr double kFormulaError = 1e-4;

// The largest |outputs[i] - formula(inputs[i])| / (1 + |formula(inputs[i])|).
template <typename Formula>
double WorstError(absl::Span<const float> inputs, absl::Span<const float> outputs,
                  Formula formula) {
  double worst = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double want = formula(static_cast<double>(inputs[i]));
    const double error =
        std::fabs(static_cast<double>(outputs[i]) - want) / (1.0 + std::fabs(want));
    // A NaN output is as wrong as it gets.
    worst = std::isnan(error) ? HUGE_VAL : std::max(worst, error);
  }
  return worst;
}

}  // namespace

const char* GeluFormulaName(GeluFormula formula) {
  switch (formula) {
    case GeluFormula::kErf:
      return "the erf form (torch.nn.GELU())";
    case GeluFormula::kTanh:
      return "the tanh approximation (torch.nn.GELU(approximate=\"tanh\"))";
    case GeluFormula::kUnknown:
      break;
  }
  return "neither GELU formula";
}

v1::Activation FusedActivation(GeluFormula formula) {
  switch (formula) {
    case GeluFormula::kErf:
      return v1::GELU;
    case GeluFormula::kTanh:
      return v1::GELU_TANH;
    case GeluFormula::kUnknown:
      break;
  }
  return v1::ACTIVATION_UNSPECIFIED;
}

GeluFit FitGelu(GeluPart part, absl::Span<const float> inputs, absl::Span<const float> outputs) {
  GeluFit fit;
  if (inputs.empty() || inputs.size() != outputs.size()) return fit;
  const bool value = part == GeluPart::kValue;
  fit.erf_error = WorstError(inputs, outputs, value ? pointwise::Gelu : pointwise::GeluGrad);
  fit.tanh_error =
      WorstError(inputs, outputs, value ? pointwise::GeluTanh : pointwise::GeluTanhGrad);
  if (fit.erf_error <= kFormulaError && fit.tanh_error >= 2 * kFormulaError) {
    fit.formula = GeluFormula::kErf;
  } else if (fit.tanh_error <= kFormulaError && fit.erf_error >= 2 * kFormulaError) {
    fit.formula = GeluFormula::kTanh;
  }
  return fit;
}

std::string DescribeGeluFit(const GeluFit& fit) {
  if (!fit.unmeasured.empty()) return absl::StrCat("not measured: ", fit.unmeasured);
  return absl::StrFormat(
      "%s (largest error %.2g against the erf form, %.2g against the tanh "
      "approximation, relative to 1 + |y|; a verdict needs <= %.0e)",
      GeluFormulaName(fit.formula), fit.erf_error, fit.tanh_error, kFormulaError);
}

double FittedError(const GeluFit& fit) {
  switch (fit.formula) {
    case GeluFormula::kErf:
      return fit.erf_error;
    case GeluFormula::kTanh:
      return fit.tanh_error;
    case GeluFormula::kUnknown:
      break;
  }
  return HUGE_VAL;
}

double FusableGeluError(ScalarType output) {
  switch (output) {
    case ScalarType::kBFloat16:
      return std::ldexp(1.0, -7) / 8;
    case ScalarType::kFloat16:
      return std::ldexp(1.0, -10) / 8;
    case ScalarType::kFloat32:
    case ScalarType::kFloat64:
    case ScalarType::kInt64:
      break;
  }
  return 8 * std::ldexp(1.0, -23);
}

std::string DescribeGeluFusion(const GeluFit& value, const GeluFit& derivative) {
  const auto outputs = [](const GeluFit& fit) {
    std::string names;
    for (ScalarType type : {ScalarType::kFloat32, ScalarType::kBFloat16, ScalarType::kFloat16}) {
      if (FittedError(fit) > FusableGeluError(type)) continue;  // infinite where unknown
      absl::StrAppend(&names, names.empty() ? "" : ", ", ScalarTypeName(type));
    }
    return names.empty() ? std::string("none") : names;
  };
  return absl::StrCat("value fused for ", outputs(value), "; derivative for ", outputs(derivative));
}

namespace {

// Whether the GEMM can apply (or differentiate) the query's GELU itself.
bool GeluFusable(const LinearEpilogueQuery& query) {
  const bool gelu = query.activation == v1::GELU || query.activation == v1::GELU_TANH;
  if (!gelu || query.activation != query.epilogue_gelu) return false;
  if (query.epilogue_gelu_error > FusableGeluError(query.output)) return false;
  if (query.pre != query.output) return false;
  // 16-bit operands with an FP32 output: FP32 storage of 16-bit values, rounded between
  // the GEMM and the activation.
  if (query.output == ScalarType::kFloat32 && query.operands != ScalarType::kFloat32) {
    return false;
  }
  return query.out > 0 && query.out % 8 == 0;
}

}  // namespace

std::optional<LinearEpilogue> ChooseLinearEpilogue(const LinearEpilogueQuery& query) {
  if (query.activation == v1::ACTIVATION_UNSPECIFIED) {
    return query.bias ? LinearEpilogue::kBias : LinearEpilogue::kNone;
  }
  if (!GeluFusable(query)) return std::nullopt;
  return query.bias ? LinearEpilogue::kGeluAuxBias : LinearEpilogue::kGeluAux;
}

std::optional<LinearEpilogue> ChooseInputGradEpilogue(const LinearEpilogueQuery& query) {
  if (!GeluFusable(query)) return std::nullopt;
  return LinearEpilogue::kDGelu;
}

}  // namespace shardwise::cuda
