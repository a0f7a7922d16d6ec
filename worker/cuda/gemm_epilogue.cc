#include "worker/cuda/gemm_epilogue.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/compute/pointwise.h"

namespace shardwise::cuda {
namespace {

// How far from a formula an epilogue may be and still be said to compute it: above what a
// hardware tanh (tanh.approx.f32, 2^-11 relative, as CUTLASS's fast GELU uses) makes of
// the value (1e-3) and of the derivative, whose 1 - tanh^2 it magnifies (5e-3), below
// the error of anything but a GELU (a forgotten bias, the input unchanged). Whether it is
// accurate enough to fuse is FusableGeluError's business.
constexpr double kGeluError = 8e-3;
// Which form an epilogue computes is told by the share of the forms' difference its
// outputs carry (ErfShare): 0 is the tanh approximation, 1 the erf form. A measurement
// within this of one and not the other decides.
constexpr double kShareMargin = 0.3;

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

// How the tanh form's value (or derivative) at x moves when its tanh is off by a fixed
// fraction of itself: the shape of a hardware tanh's error wherever its relative error
// is steady (a bias, say, rather than noise).
double TanhScaleShape(GeluPart part, double x) {
  using pointwise::kGeluTanhCubic;
  using pointwise::kSqrt2OverPi;
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluTanhCubic * x * x * x));
  if (part == GeluPart::kValue) return 0.5 * x * t;
  const double inner = kSqrt2OverPi * (1.0 + 3.0 * kGeluTanhCubic * x * x);
  return (0.5 - x * t * inner) * t;  // d/dt of 0.5 (1 + t) + 0.5 x (1 - t^2) inner, times t
}

// The share s of the least-squares fit outputs = tanh_form + s (erf_form - tanh_form) +
// c TanhScaleShape, each term relative to 1 + |tanh_form|. A fast tanh errs by as much as
// the forms differ (up to 1e-3 in value where they differ by 4.7e-4, more in derivative):
// an error that varies from input to input averages out of s, and one steady in relative
// terms goes into c; either way the largest error alone would not tell the forms apart.
// NaN where the two shapes cannot be told apart over the inputs.
double ErfShare(GeluPart part, absl::Span<const float> inputs, absl::Span<const float> outputs) {
  const bool value = part == GeluPart::kValue;
  double dd = 0, dg = 0, gg = 0, rd = 0, rg = 0;  // the normal equations' sums
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double x = static_cast<double>(inputs[i]);
    const double base = value ? pointwise::GeluTanh(x) : pointwise::GeluTanhGrad(x);
    const double scale = 1.0 + std::fabs(base);
    const double d = ((value ? pointwise::Gelu(x) : pointwise::GeluGrad(x)) - base) / scale;
    const double g = TanhScaleShape(part, x) / scale;
    const double r = (static_cast<double>(outputs[i]) - base) / scale;
    dd += d * d;
    dg += d * g;
    gg += g * g;
    rd += r * d;
    rg += r * g;
  }
  const double determinant = dd * gg - dg * dg;
  return determinant > 1e-12 * dd * gg ? (rd * gg - rg * dg) / determinant : NAN;
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
  const auto erf = value ? pointwise::Gelu : pointwise::GeluGrad;
  const auto tanh = value ? pointwise::GeluTanh : pointwise::GeluTanhGrad;
  fit.erf_error = WorstError(inputs, outputs, erf);
  fit.tanh_error = WorstError(inputs, outputs, tanh);
  fit.erf_share = ErfShare(part, inputs, outputs);
  // NaN shares and infinite errors compare false: no verdict.
  if (fit.erf_share >= 1 - kShareMargin && fit.erf_share <= 1 + kShareMargin &&
      fit.erf_error <= kGeluError) {
    fit.formula = GeluFormula::kErf;
  } else if (std::fabs(fit.erf_share) <= kShareMargin && fit.tanh_error <= kGeluError) {
    fit.formula = GeluFormula::kTanh;
  }
  return fit;
}

std::string DescribeGeluFit(const GeluFit& fit) {
  if (!fit.unmeasured.empty()) return absl::StrCat("not measured: ", fit.unmeasured);
  return absl::StrFormat(
      "%s (largest error %.2g against the erf form, %.2g against the tanh "
      "approximation, relative to 1 + |y|; the erf form's share %.2f; a verdict needs a "
      "share within %.1f of 1 or 0 and an error <= %.0e)",
      GeluFormulaName(fit.formula), fit.erf_error, fit.tanh_error, fit.erf_share, kShareMargin,
      kGeluError);
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
