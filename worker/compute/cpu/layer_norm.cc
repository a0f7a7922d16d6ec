#include "worker/compute/cpu/layer_norm.h"

#include <cmath>
#include <vector>

namespace shardwise::cpu {

template <typename T>
void LayerNormForward(const T* x, const T* w, const T* b, int64_t rows, int64_t dim, T eps, T* y,
                      T* mean, T* rstd) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = x + i * dim;
    double sum = 0;
    for (int64_t j = 0; j < dim; ++j) sum += row[j];
    const double mu = sum / dim;
    double squares = 0;
    for (int64_t j = 0; j < dim; ++j) squares += (row[j] - mu) * (row[j] - mu);
    const T m = static_cast<T>(mu);
    const T r = static_cast<T>(1.0 / std::sqrt(squares / dim + eps));
    mean[i] = m;
    rstd[i] = r;
    const T shift = -r * m;
    T* out = y + i * dim;
    for (int64_t j = 0; j < dim; ++j) {
      out[j] = (row[j] * r + shift) * (w != nullptr ? w[j] : T{1}) + (b != nullptr ? b[j] : T{0});
    }
  }
}

template <typename T>
void LayerNormBackward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy,
                       int64_t rows, int64_t dim, T* dx, T* dw, T* db) {
  std::vector<double> dw_sum(dw != nullptr ? dim : 0), db_sum(db != nullptr ? dim : 0);
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = x + i * dim;
    const T* grad = dy + i * dim;
    const double m = mean[i], r = rstd[i];
    // The means of g and g * xhat over the row.
    double g_sum = 0, g_xhat_sum = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double xhat = (row[j] - m) * r;
      const double g = static_cast<double>(grad[j]) * (w != nullptr ? w[j] : 1.0);
      g_sum += g;
      g_xhat_sum += g * xhat;
      if (dw != nullptr) dw_sum[j] += grad[j] * xhat;
      if (db != nullptr) db_sum[j] += grad[j];
    }
    const double g_mean = g_sum / dim, g_xhat_mean = g_xhat_sum / dim;
    T* out = dx + i * dim;
    for (int64_t j = 0; j < dim; ++j) {
      const double xhat = (row[j] - m) * r;
      const double g = static_cast<double>(grad[j]) * (w != nullptr ? w[j] : 1.0);
      out[j] = static_cast<T>(r * (g - g_mean - xhat * g_xhat_mean));
    }
  }
  for (int64_t j = 0; j < static_cast<int64_t>(dw_sum.size()); ++j)
    dw[j] += static_cast<T>(dw_sum[j]);
  for (int64_t j = 0; j < static_cast<int64_t>(db_sum.size()); ++j)
    db[j] += static_cast<T>(db_sum[j]);
}

template void LayerNormForward(const float*, const float*, const float*, int64_t, int64_t, float,
                               float*, float*, float*);
template void LayerNormForward(const double*, const double*, const double*, int64_t, int64_t,
                               double, double*, double*, double*);
template void LayerNormBackward(const float*, const float*, const float*, const float*,
                                const float*, int64_t, int64_t, float*, float*, float*);
template void LayerNormBackward(const double*, const double*, const double*, const double*,
                                const double*, int64_t, int64_t, double*, double*, double*);

}  // namespace shardwise::cpu
