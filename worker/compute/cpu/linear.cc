#include "worker/compute/cpu/linear.h"

#include <algorithm>
#include <type_traits>

#include "worker/compute/cpu/gemm.h"
#include "worker/compute/cpu/vector_clones.h"

namespace shardwise::cpu {
namespace {

// db += the rows of dy, in row order.
template <typename T>
__attribute__((always_inline)) inline void AddRows(const T* dy, int64_t batch, int64_t out, T* db) {
  for (int64_t i = 0; i < batch; ++i) {
    const T* row = dy + i * out;
    for (int64_t j = 0; j < out; ++j) db[j] += row[j];
  }
}

// Training's float form cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES void AddRowsF(const float* dy, int64_t batch, int64_t out, float* db) {
  AddRows(dy, batch, out, db);
}

}  // namespace

template <typename T>
void LinearForward(const T* x, const T* w, const T* b, int64_t batch, int64_t in, int64_t out,
                   T* y) {
  if (b != nullptr) {
    for (int64_t i = 0; i < batch; ++i) std::copy(b, b + out, y + i * out);
  }
  Gemm(false, true, batch, out, in, T{1}, x, in, w, in, b != nullptr ? T{1} : T{0}, y, out);
}

template <typename T>
void LinearBackward(const T* x, const T* w, const T* dy, int64_t batch, int64_t in, int64_t out,
                    T* dx, T* dw, T* db) {
  if (dx != nullptr) Gemm(false, false, batch, in, out, T{1}, dy, out, w, in, T{0}, dx, in);
  Gemm(true, false, out, in, batch, T{1}, dy, out, x, in, T{1}, dw, in);
  if (db == nullptr) return;
  if constexpr (std::is_same_v<T, float>) {
    AddRowsF(dy, batch, out, db);
  } else {
    AddRows(dy, batch, out, db);
  }
}

template void LinearForward(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                            float*);
template void LinearForward(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                            double*);
template void LinearBackward(const float*, const float*, const float*, int64_t, int64_t, int64_t,
                             float*, float*, float*);
template void LinearBackward(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                             double*, double*, double*);

}  // namespace shardwise::cpu
