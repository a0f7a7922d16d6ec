#include "worker/compute/cpu/losses.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/row_max.h"
#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/float_math.h"

namespace shardwise::cpu {
namespace {

// The logit at a row's label, read before the gradient overwrites the row (dlogits may
// be the logits); 0 for a label outside [0, classes).
template <typename T>
T LabelLogit(const T* row, int64_t label, int64_t classes) {
  return label >= 0 && label < classes ? row[label] : T{0};
}

// The loss of one row whose label is `label`: log(sum) + max - row[label], NaN for a label
// outside [0, classes). The loaders refuse such a label, naming its file and position; one
// that got past them makes the loss NaN (the step then fails), never a read outside the
// row.
template <typename T>
double RowLoss(double log_sum, T label_logit, int64_t label, int64_t classes) {
  return label >= 0 && label < classes ? log_sum - label_logit
                                       : std::numeric_limits<double>::quiet_NaN();
}

// One row in float: e_j = ExpF(x_j - max) into grad (float_math.h, vectorised), their sum
// in double over 8 lanes (lane_sum.h), then grad = e_j / sum * grad_scale, less
// grad_scale at the label. Returns the row's loss. ExpF's floor (e^-87) leaves a logit
// more than 87 below the row's max a probability of about 1e-38 / sum, not 0.
__attribute__((always_inline)) inline double CrossEntropyRow(const float* row, int64_t label,
                                                             int64_t classes, float grad_scale,
                                                             float* grad) {
  const float max = RowMax(row, classes);
  const float label_logit = LabelLogit(row, label, classes);
  for (int64_t j = 0; j < classes; ++j) grad[j] = float_math::ExpF(row[j] - max);
  const double sum = LaneSum<double, 8>(classes, [&](int64_t j) { return double{grad[j]}; });
  const double log_sum = std::log(sum) + max;
  const float inverse = static_cast<float>(1.0 / sum);
  const bool in_range = label >= 0 && label < classes;
  const float at_label = in_range ? grad[label] * inverse : 0.0f;
  for (int64_t j = 0; j < classes; ++j) grad[j] = grad[j] * inverse * grad_scale;
  if (in_range) grad[label] = (at_label - 1.0f) * grad_scale;
  return RowLoss(log_sum, label_logit, label, classes);
}

// Cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES double CrossEntropyF(const float* logits, const int64_t* labels,
                                             int64_t rows, int64_t classes, float grad_scale,
                                             float* dlogits) {
  double total = 0;
  for (int64_t i = 0; i < rows; ++i) {
    total += CrossEntropyRow(logits + i * classes, labels[i], classes, grad_scale,
                             dlogits + i * classes);
  }
  return total;
}

}  // namespace

// Float (training): the exponentials in float (CrossEntropyRow). PyTorch's CPU
// log_softmax runs them in float as well; the double form below keeps libm's.
template <>
double CrossEntropy(const float* logits, const int64_t* labels, int64_t rows, int64_t classes,
                    float scale, float* dlogits) {
  const float grad_scale = scale / static_cast<float>(rows);
  const double total = CrossEntropyF(logits, labels, rows, classes, grad_scale, dlogits);
  return total / static_cast<double>(rows) * scale;
}

template <typename T>
double CrossEntropy(const T* logits, const int64_t* labels, int64_t rows, int64_t classes, T scale,
                    T* dlogits) {
  double total = 0;
  const T grad_scale = scale / static_cast<T>(rows);
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = logits + i * classes;
    T* grad = dlogits + i * classes;
    const T max = *std::max_element(row, row + classes);
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j] - max));
    const double log_sum = std::log(sum) + max;
    const int64_t label = labels[i];
    total += RowLoss(log_sum, LabelLogit(row, label, classes), label, classes);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(row[j] - log_sum);
      grad[j] = static_cast<T>(p - (j == label ? 1.0 : 0.0)) * grad_scale;
    }
  }
  return total / static_cast<double>(rows) * scale;
}

template <typename T>
double MeanSquaredError(const T* pred, const T* target, int64_t rows, int64_t out, T scale,
                        T* dpred) {
  const int64_t n = rows * out;
  double total = 0;
  const T grad_scale = T{2} * scale / static_cast<T>(n);
  for (int64_t i = 0; i < n; ++i) {
    const T diff = pred[i] - target[i];
    total += static_cast<double>(diff) * diff;
    dpred[i] = diff * grad_scale;
  }
  return total / static_cast<double>(n) * scale;
}

template double CrossEntropy(const double*, const int64_t*, int64_t, int64_t, double, double*);
template double MeanSquaredError(const float*, const float*, int64_t, int64_t, float, float*);
template double MeanSquaredError(const double*, const double*, int64_t, int64_t, double, double*);

}  // namespace shardwise::cpu
