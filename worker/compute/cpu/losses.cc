#include "worker/compute/cpu/losses.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardwise::cpu {

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
    // The loaders refuse a label outside [0, classes), naming its file and position; one
    // that got past them makes the loss NaN (the step then fails), never a read outside
    // the row.
    const bool in_range = label >= 0 && label < classes;
    total += in_range ? log_sum - row[label] : std::numeric_limits<double>::quiet_NaN();
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

template double CrossEntropy(const float*, const int64_t*, int64_t, int64_t, float, float*);
template double CrossEntropy(const double*, const int64_t*, int64_t, int64_t, double, double*);
template double MeanSquaredError(const float*, const float*, int64_t, int64_t, float, float*);
template double MeanSquaredError(const double*, const double*, int64_t, int64_t, double, double*);

}  // namespace shardwise::cpu
