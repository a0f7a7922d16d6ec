#ifndef SHARDWISE_WORKER_CUDA_GEMM_EPILOGUE_H_
#define SHARDWISE_WORKER_CUDA_GEMM_EPILOGUE_H_

// What a Linear layer's GEMM does to its result before writing it (cuBLASLt's epilogue,
// blas_lt.h): add the bias, apply GELU keeping its input for the backward, or multiply an
// input gradient by GELU's derivative at that kept input. Pure decisions, so they build
// and are tested without a GPU (gemm_epilogue_test):
// - which GELU formula each epilogue computes. cuBLASLt's documentation says "GELU" and
//   no more, so the CUDA device measures them once (blas_lt.h ProbeGeluEpilogues: GEMMs
//   whose products are exact, so the outputs are the formula's values at known inputs)
//   and fuses only the activation whose formula it is; FitGelu judges a measurement;
// - which epilogue a Linear forward, or a Linear's input gradient, takes, or none (the
//   operations one by one).

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/types/span.h"
#include "proto/job_spec.pb.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::cuda {

// The GELU formula an epilogue computes: the erf form (torch.nn.GELU()), its tanh
// approximation (approximate="tanh"), or neither of them (or a GEMM that went wrong).
enum class GeluFormula { kUnknown, kErf, kTanh };

const char* GeluFormulaName(GeluFormula formula);
// The job's activation that `formula` computes (GELU, GELU_TANH), or
// ACTIVATION_UNSPECIFIED for kUnknown: nothing to fuse.
v1::Activation FusedActivation(GeluFormula formula);

// What an epilogue computes of GELU: its value (the forward) or its derivative (the
// backward's DGELU).
enum class GeluPart { kValue, kDerivative };

// How a measurement of an epilogue's `part` fits each formula: the largest error against
// each (|output - formula(input)| / (1 + |formula(input)|), infinite for a NaN output or
// where nothing was measured), the share of the two forms' difference the outputs carry
// (0 for the tanh approximation, 1 for the erf form), and the formula it computes by
// these measures, if any.
struct GeluFit {
  GeluFormula formula = GeluFormula::kUnknown;
  double erf_error = HUGE_VAL;
  double tanh_error = HUGE_VAL;
  // Why nothing was measured, where nothing was (cuBLASLt refused the epilogue, or the
  // GEMM's kept input was wrong); empty otherwise.
  std::string unmeasured;
  double erf_share = NAN;
};

// The fit of `part` mapping each `inputs[i]` to `outputs[i]` (FP32 results). The forms
// differ by up to 4.7e-4 in value near x = -2.7 and 8e-4 in derivative near x = -2.1, no
// more than a fast (hardware) tanh may err, so the verdict is the erf form's least-squares
// share of that difference, fitted beside the shape a steady relative tanh error has:
// within 0.3 of 1 (the erf form) or of 0 (the tanh approximation), with the largest error
// against that form under 8e-3 (a GELU at all).
// kUnknown otherwise, or when the spans differ in size. How accurate the epilogue is, for
// fusing it, is the fit's error (FittedError). The inputs should cover [-4, 4].
GeluFit FitGelu(GeluPart part, absl::Span<const float> inputs, absl::Span<const float> outputs);

// For logs and test output: the formula with both errors, or why nothing was measured.
std::string DescribeGeluFit(const GeluFit& fit);

// The fit's error against the formula it found (infinite where it found none).
double FittedError(const GeluFit& fit);

// The most an epilogue's GELU may err (as FitGelu measures) for a GEMM writing `output` to
// fuse it: in FP32, 8 of FP32's epsilon (float arithmetic's own error on the formula, as
// PyTorch's FP32 GELU has); in 16 bits, an eighth of the type's epsilon, so the output's
// rounding dominates.
double FusableGeluError(ScalarType output);

// For the worker's log: which outputs (FP32, BF16, FP16) each part fuses for, by
// FusableGeluError, e.g. "value fused for FP32, BF16, FP16; derivative for BF16, FP16".
std::string DescribeGeluFusion(const GeluFit& value, const GeluFit& derivative);

enum class LinearEpilogue {
  kNone,         // y = x W^T
  kBias,         // y = x W^T + b
  kGeluAux,      // pre = x W^T; y = GELU(pre)
  kGeluAuxBias,  // pre = x W^T + b; y = GELU(pre)
  kDGelu,        // the input gradient: dpre = (dy W) * GELU'(pre), pre kept by the forward
};

struct LinearEpilogueQuery {
  // The activation after the GEMM (ACTIVATION_UNSPECIFIED: none).
  v1::Activation activation = v1::ACTIVATION_UNSPECIFIED;
  bool bias = false;
  ScalarType operands = ScalarType::kFloat32;  // x and W
  ScalarType pre = ScalarType::kFloat32;       // the activation's input, kept
  ScalarType output = ScalarType::kFloat32;    // y
  int64_t out = 0;                             // y's columns (the kept input's)
  // The activation whose formula the epilogue computes (FusedActivation of the probe's
  // verdict on the forward's GELU, or on the backward's derivative), and its measured
  // error against that formula (FittedError).
  v1::Activation epilogue_gelu = v1::ACTIVATION_UNSPECIFIED;
  double epilogue_gelu_error = HUGE_VAL;
};

// The epilogue for y = activation(x W^T + b), or none where the GEMM cannot do it all and
// the operations run one by one: an activation other than the epilogue's GELU, or one it
// computes less accurately than FusableGeluError(output) allows; the kept
// input and y in different types; 16-bit values held in FP32 storage (rounded to 16 bits
// between the GEMM and the activation, a rounding point the epilogue does not have); the
// kept input's columns not a multiple of 8 (cuBLASLt's rule for its leading dimension).
std::optional<LinearEpilogue> ChooseLinearEpilogue(const LinearEpilogueQuery& query);

// The epilogue for a Linear's input gradient when its input was activation(pre) (pre the
// kept input of `out` columns, `output` the gradient's type): kDGelu under the forward's
// GELU rules (the same activation, types and columns), else none. Biases play no part.
std::optional<LinearEpilogue> ChooseInputGradEpilogue(const LinearEpilogueQuery& query);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_GEMM_EPILOGUE_H_
