#include "worker/compute/cpu/embedding.h"

#include <algorithm>

namespace shardwise::cpu {

template <typename T>
void EmbeddingForward(const T* table, const int64_t* ids, int64_t n, int64_t dim, T* out) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(table + ids[i] * dim, dim, out + i * dim);
}

template <typename T>
void EmbeddingBackward(const int64_t* ids, const T* dout, int64_t n, int64_t dim, T* dtable) {
  for (int64_t i = 0; i < n; ++i) {
    T* row = dtable + ids[i] * dim;
    const T* grad = dout + i * dim;
    for (int64_t j = 0; j < dim; ++j) row[j] += grad[j];
  }
}

template void EmbeddingForward(const float*, const int64_t*, int64_t, int64_t, float*);
template void EmbeddingForward(const double*, const int64_t*, int64_t, int64_t, double*);
template void EmbeddingBackward(const int64_t*, const float*, int64_t, int64_t, float*);
template void EmbeddingBackward(const int64_t*, const double*, int64_t, int64_t, double*);

}  // namespace shardwise::cpu
