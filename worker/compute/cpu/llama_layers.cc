#include "worker/compute/cpu/llama_layers.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "worker/compute/attention_shape.h"
#include "worker/compute/llama_rows.h"

namespace shardwise::cpu {

template <typename T>
void RmsNormForward(const T* x, const T* w, int64_t rows, int64_t dim, T eps, T* y, T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    rstd[r] = llama_rows::RmsNormRstd(x + r * dim, dim, eps);
    llama_rows::RmsNormForwardRow(x + r * dim, w, dim, rstd[r], y + r * dim);
  }
}

// dw in the chunked order llama_rows.h fixes (a chunk's sums row-major here, in `chunk`).
template <typename T>
void RmsNormBackward(const T* x, const T* w, const T* rstd, const T* dy, int64_t rows, int64_t dim,
                     T* dx, T* dw) {
  std::vector<T> chunk(static_cast<size_t>(dim));
  for (int64_t begin = 0; begin < rows; begin += llama_rows::kWeightGradChunkRows) {
    const int64_t end = std::min(rows, begin + llama_rows::kWeightGradChunkRows);
    std::fill(chunk.begin(), chunk.end(), T{0});
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * dim;
      const T* dyr = dy + r * dim;
      llama_rows::RmsNormBackwardRow(xr, w, rstd[r], dyr, dim, dx + r * dim);
      for (int64_t i = 0; i < dim; ++i) {
        chunk[i] += llama_rows::RmsNormWeightGradTerm(xr[i], dyr[i], rstd[r]);
      }
    }
    for (int64_t i = 0; i < dim; ++i) dw[i] += chunk[i];
  }
}

template <typename T>
void Rotary(T* x, const T* cos, const T* sin, int64_t rows, int64_t seq, int64_t heads,
            int64_t head_dim, bool inverse) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const T* c = cos + (r % seq) * half;
    const T* s = sin + (r % seq) * half;
    for (int64_t h = 0; h < heads; ++h) {
      T* head = x + (r * heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        llama_rows::RotatePair(head + i, head + i + half, c[i], s[i], inverse);
      }
    }
  }
}

template <typename T>
void PackGroupedQkv(const T* q, const T* k, const T* v, int64_t rows, int64_t heads,
                    int64_t kv_heads, int64_t head_dim, T* qkv) {
  const int64_t width = heads * head_dim, kv_width = kv_heads * head_dim;
  for (int64_t r = 0; r < rows; ++r) {
    T* out = qkv + r * 3 * width;
    std::memcpy(out, q + r * width, width * sizeof(T));
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t from = r * kv_width + KvHeadOf(h, heads, kv_heads) * head_dim;
      std::memcpy(out + width + h * head_dim, k + from, head_dim * sizeof(T));
      std::memcpy(out + 2 * width + h * head_dim, v + from, head_dim * sizeof(T));
    }
  }
}

template <typename T>
void UnpackGroupedQkvGrad(const T* dqkv, int64_t rows, int64_t heads, int64_t kv_heads,
                          int64_t head_dim, T* dq, T* dk, T* dv) {
  const int64_t width = heads * head_dim, kv_width = kv_heads * head_dim;
  std::fill(dk, dk + rows * kv_width, T{0});
  std::fill(dv, dv + rows * kv_width, T{0});
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = dqkv + r * 3 * width;
    std::memcpy(dq + r * width, in, width * sizeof(T));
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t to = r * kv_width + KvHeadOf(h, heads, kv_heads) * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) {
        dk[to + d] += in[width + h * head_dim + d];
        dv[to + d] += in[2 * width + h * head_dim + d];
      }
    }
  }
}

template void RmsNormForward(const float*, const float*, int64_t, int64_t, float, float*, float*);
template void RmsNormBackward(const float*, const float*, const float*, const float*, int64_t,
                              int64_t, float*, float*);
template void Rotary(float*, const float*, const float*, int64_t, int64_t, int64_t, int64_t, bool);
template void PackGroupedQkv(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                             int64_t, float*);
template void UnpackGroupedQkvGrad(const float*, int64_t, int64_t, int64_t, int64_t, float*, float*,
                                   float*);

template void RmsNormForward(const double*, const double*, int64_t, int64_t, double, double*,
                             double*);
template void RmsNormBackward(const double*, const double*, const double*, const double*, int64_t,
                              int64_t, double*, double*);
template void Rotary(double*, const double*, const double*, int64_t, int64_t, int64_t, int64_t,
                     bool);
template void PackGroupedQkv(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                             int64_t, double*);
template void UnpackGroupedQkvGrad(const double*, int64_t, int64_t, int64_t, int64_t, double*,
                                   double*, double*);

}  // namespace shardwise::cpu
