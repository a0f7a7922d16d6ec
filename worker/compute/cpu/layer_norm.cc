#include "worker/compute/cpu/layer_norm.h"

#include <cmath>
#include <vector>

#include "worker/compute/cpu/lane_sum.h"
#include "worker/compute/cpu/vector_clones.h"

namespace shardwise::cpu {
namespace {

// Sums in double over four lanes (lane_sum.h). In double, the order moves a float result
// by a rounding at most.
template <typename F>
__attribute__((always_inline)) inline double LaneSum(int64_t n, const F& term) {
  return cpu::LaneSum<double, 4>(n, term);
}

template <typename T>
__attribute__((always_inline)) inline void Forward(const T* x, const T* w, const T* b, int64_t rows,
                                                   int64_t dim, T eps, T* y, T* mean, T* rstd) {
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = x + i * dim;
    const double mu = LaneSum(dim, [&](int64_t j) { return double{row[j]}; }) / dim;
    const double squares = LaneSum(dim, [&](int64_t j) {
      const double centred = row[j] - mu;
      return centred * centred;
    });
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
__attribute__((always_inline)) inline void Backward(const T* x, const T* w, const T* mean,
                                                    const T* rstd, const T* dy, int64_t rows,
                                                    int64_t dim, T* dx, T* dw, T* db) {
  std::vector<double> dw_sum(dw != nullptr ? dim : 0), db_sum(db != nullptr ? dim : 0);
  // Each row's xhat and g, computed once for the loops below (which read them each).
  std::vector<double> xhat(dim), g(dim);
  for (int64_t i = 0; i < rows; ++i) {
    const T* row = x + i * dim;
    const T* grad = dy + i * dim;
    const double m = mean[i], r = rstd[i];
    for (int64_t j = 0; j < dim; ++j) {
      xhat[j] = (row[j] - m) * r;
      g[j] = static_cast<double>(grad[j]) * (w != nullptr ? w[j] : 1.0);
    }
    // The means of g and g * xhat over the row.
    const double g_mean = LaneSum(dim, [&](int64_t j) { return g[j]; }) / dim;
    const double g_xhat_mean = LaneSum(dim, [&](int64_t j) { return g[j] * xhat[j]; }) / dim;
    if (dw != nullptr) {
      for (int64_t j = 0; j < dim; ++j) dw_sum[j] += grad[j] * xhat[j];
    }
    if (db != nullptr) {
      for (int64_t j = 0; j < dim; ++j) db_sum[j] += grad[j];
    }
    T* out = dx + i * dim;
    for (int64_t j = 0; j < dim; ++j) {
      out[j] = static_cast<T>(r * (g[j] - g_mean - xhat[j] * g_xhat_mean));
    }
  }
  for (int64_t j = 0; j < static_cast<int64_t>(dw_sum.size()); ++j)
    dw[j] += static_cast<T>(dw_sum[j]);
  for (int64_t j = 0; j < static_cast<int64_t>(db_sum.size()); ++j)
    db[j] += static_cast<T>(db_sum[j]);
}

// Training's float forms cloned for the widest vectors the CPU has (vector_clones.h);
// the gradient checks' double ones as they are.
SHARDWISE_VECTOR_CLONES void LayerNormForwardF(const float* x, const float* w, const float* b,
                                               int64_t rows, int64_t dim, float eps, float* y,
                                               float* mean, float* rstd) {
  Forward(x, w, b, rows, dim, eps, y, mean, rstd);
}

SHARDWISE_VECTOR_CLONES void LayerNormBackwardF(const float* x, const float* w, const float* mean,
                                                const float* rstd, const float* dy, int64_t rows,
                                                int64_t dim, float* dx, float* dw, float* db) {
  Backward(x, w, mean, rstd, dy, rows, dim, dx, dw, db);
}

}  // namespace

template <>
void LayerNormForward(const float* x, const float* w, const float* b, int64_t rows, int64_t dim,
                      float eps, float* y, float* mean, float* rstd) {
  LayerNormForwardF(x, w, b, rows, dim, eps, y, mean, rstd);
}

template <>
void LayerNormForward(const double* x, const double* w, const double* b, int64_t rows, int64_t dim,
                      double eps, double* y, double* mean, double* rstd) {
  Forward(x, w, b, rows, dim, eps, y, mean, rstd);
}

template <>
void LayerNormBackward(const float* x, const float* w, const float* mean, const float* rstd,
                       const float* dy, int64_t rows, int64_t dim, float* dx, float* dw,
                       float* db) {
  LayerNormBackwardF(x, w, mean, rstd, dy, rows, dim, dx, dw, db);
}

template <>
void LayerNormBackward(const double* x, const double* w, const double* mean, const double* rstd,
                       const double* dy, int64_t rows, int64_t dim, double* dx, double* dw,
                       double* db) {
  Backward(x, w, mean, rstd, dy, rows, dim, dx, dw, db);
}

}  // namespace shardwise::cpu
