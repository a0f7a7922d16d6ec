#ifndef SHARDWISE_WORKER_CUDA_STORAGE_ELEMENTS_CUH_
#define SHARDWISE_WORKER_CUDA_STORAGE_ELEMENTS_CUH_

// Kernels that read and write values in their storage type (runtime/tensor_ref.h: FP32,
// or a job's 16-bit param_dtype) compute in float: a 16-bit value is widened exactly as
// it is loaded and a result rounded to nearest even as it is stored, as cuda::Narrow
// rounds, so a kernel typed this way writes the value that FP32 storage followed by
// RoundToPrecision holds. CUDA source only.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "worker/compute/norm_rows.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/runtime/scalar_type.h"
#include "worker/runtime/tensor_ref.h"

namespace shardwise::cuda::internal {

__device__ __forceinline__ float LoadFloat(const float* p, size_t i) { return p[i]; }
__device__ __forceinline__ float LoadFloat(const __nv_bfloat16* p, size_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ float LoadFloat(const __half* p, size_t i) { return __half2float(p[i]); }

__device__ __forceinline__ void StoreFloat(float* p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void StoreFloat(__nv_bfloat16* p, size_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}
__device__ __forceinline__ void StoreFloat(__half* p, size_t i, float v) {
  p[i] = __float2half_rn(v);
}

// Calls `f` with a null `T*` for the C++ type that stores `type`'s values (float,
// __nv_bfloat16 or __half), so a launcher instantiates its kernel for the argument's
// type; false for a type no kernel stores (INT64, FP64).
template <typename F>
bool WithStoredType(ScalarType type, F&& f) {
  switch (type) {
    case ScalarType::kFloat32:
      std::forward<F>(f)(static_cast<float*>(nullptr));
      return true;
    case ScalarType::kBFloat16:
      std::forward<F>(f)(static_cast<__nv_bfloat16*>(nullptr));
      return true;
    case ScalarType::kFloat16:
      std::forward<F>(f)(static_cast<__half*>(nullptr));
      return true;
    case ScalarType::kInt64:
    case ScalarType::kFloat64:
      break;
  }
  return false;
}

// For arguments that share one type (an elementwise kernel's inputs and outputs): false
// where they differ.
template <typename F>
bool WithSharedStoredType(std::initializer_list<ScalarType> types, F&& f) {
  for (ScalarType type : types) {
    if (type != *types.begin()) return false;
  }
  return WithStoredType(*types.begin(), std::forward<F>(f));
}

// The same for two arguments' types: `f` gets a null pointer of each.
template <typename F>
bool WithStoredTypes(ScalarType first, ScalarType second, F&& f) {
  bool typed = false;
  WithStoredType(first, [&](auto* first_type) {
    typed = WithStoredType(second, [&](auto* second_type) { f(first_type, second_type); });
  });
  return typed;
}

// The one type of `values`' present (non-null) members into *type, left as it is where
// none is present; false where they differ.
inline bool PresentType(std::initializer_list<ConstTensorRef> values, ScalarType* type) {
  bool seen = false;
  for (const ConstTensorRef& value : values) {
    if (value.null()) continue;
    if (seen && value.type() != *type) return false;
    *type = value.type();
    seen = true;
  }
  return true;
}

// For a norm: `f(row_type, weight_type)` with null pointers of the rows' stored type T
// (`rows`: all present, of one type; `residual`: absent, or of that type too) and of the
// weights' W (`weights`, those present of one type: FP32, or T itself, a 16-bit job's
// parameters in 16-bit storage); false for other mixes, and where a row is absent (a
// kernel would write through it).
template <typename F>
bool WithRowAndWeightTypes(std::initializer_list<ConstTensorRef> rows, ConstTensorRef residual,
                           std::initializer_list<ConstTensorRef> weights, F&& f) {
  ScalarType row_type = ScalarType::kFloat32, weight_type = ScalarType::kFloat32;
  for (const ConstTensorRef& row : rows) {
    if (row.null()) return false;
  }
  if (!PresentType(rows, &row_type) || !PresentType(weights, &weight_type)) return false;
  if (!residual.null() && residual.type() != row_type) return false;
  if (weight_type != ScalarType::kFloat32 && weight_type != row_type) return false;
  return WithStoredType(row_type, [&](auto* stored) {
    if (weight_type == ScalarType::kFloat32) {
      f(stored, static_cast<float*>(nullptr));
    } else {
      f(stored, stored);
    }
  });
}

// A row of T values as compute/norm_rows.h's routines read it (groups of four, zero past
// the row's end) and write it (`row[j] = value`): FP32 rows are kernel_support.cuh's
// DeviceRow (16-byte loads) and plain pointers; 16-bit rows are read a group (8 bytes) at a
// time where aligned, widened, and written value by value, rounded once.
// A 16-bit row's group is one 8-byte load where the row is 8-byte aligned and holds the
// whole group, else value by value (the same values either way).
template <typename T>
struct StoredRowLoad {
  static_assert(sizeof(T) * norm_rows::kVector == sizeof(uint2), "a group is 8 bytes");
  const T* row;
  int64_t dim;
  bool aligned;
  __device__ StoredRowLoad(const T* row, int64_t dim)
      : row(row), dim(dim), aligned(reinterpret_cast<uintptr_t>(row) % sizeof(uint2) == 0) {}
  __device__ norm_rows::Quad operator()(int64_t g) const {
    norm_rows::Quad q{};
    if (aligned && (g + 1) * norm_rows::kVector <= dim) {
      const uint2 raw = reinterpret_cast<const uint2*>(row)[g];
      T values[norm_rows::kVector];
      memcpy(values, &raw, sizeof(raw));
      for (int k = 0; k < norm_rows::kVector; ++k) q.v[k] = LoadFloat(values, k);
      return q;
    }
    for (int k = 0; k < norm_rows::kVector; ++k) {
      const int64_t j = g * norm_rows::kVector + k;
      q.v[k] = j < dim ? LoadFloat(row, j) : 0.0f;
    }
    return q;
  }
};
template <typename T>
struct StoredRowStore {
  struct Element {
    T* place;
    __device__ void operator=(float value) const { StoreFloat(place, 0, value); }  // NOLINT
  };
  T* row;
  __device__ Element operator[](int64_t j) const { return {row + j}; }
};

// A row whose `row[j] = value` adds the value, rounded to T, to what the row holds, the
// sum rounded to T: what a plain store into a scratch row followed by Accumulate (dst +
// src) writes, without the scratch row (a norm's input gradient added to the residual's).
// The add is __fadd_rn: a plain + after the value's last product could be contracted
// into one FMA (nvcc's default), which rounds once where the two operations round twice.
template <typename T>
struct AddingRowStore {
  struct Element {
    T* place;
    __device__ void operator=(float value) const {  // NOLINT
      T rounded;
      StoreFloat(&rounded, 0, value);
      StoreFloat(place, 0, __fadd_rn(LoadFloat(place, 0), LoadFloat(&rounded, 0)));
    }
  };
  T* row;
  __device__ Element operator[](int64_t j) const { return {row + j}; }
};

// x[j] = x[j] + residual[j] over this lane's groups of a row (norm_rows' order: group g by
// lane g % kLanes), each sum rounded to T as it is stored: Accumulate's values, written
// where the same lane reads them back (a norm's row routines read only their lane's
// groups; lanes exchange only the sums' registers), so no other lane's write is waited for.
template <typename T>
__device__ void AddResidualRow(T* x, const T* residual, int64_t dim, int lane) {
  for (int64_t g = lane; g < norm_rows::Groups(dim); g += norm_rows::kLanes) {
    for (int k = 0; k < norm_rows::kVector && g * norm_rows::kVector + k < dim; ++k) {
      const int64_t j = g * norm_rows::kVector + k;
      StoreFloat(x, j, LoadFloat(x, j) + LoadFloat(residual, j));
    }
  }
  // The row is read back as vectors of another type (uint2 for 16-bit values): a compiler
  // fence, so that type-based alias analysis cannot move those loads above these stores.
  asm volatile("" ::: "memory");
}

template <typename T>
struct RowAccess {
  using Load = StoredRowLoad<T>;
  using Store = StoredRowStore<T>;
};
template <>
struct RowAccess<float> {
  using Load = DeviceRow;
  using Store = float*;
};
template <typename T>
__device__ typename RowAccess<T>::Load LoadRow(const T* row, int64_t dim) {
  return typename RowAccess<T>::Load{row, dim};
}
template <typename T>
__device__ typename RowAccess<T>::Store StoreRow(T* row) {
  return typename RowAccess<T>::Store{row};
}
// A norm backward's values with their types: rows x, dy and dx stored as T, the weight
// as W (WithRowAndWeightTypes's rule).
template <typename T, typename W>
struct NormGradValues {
  const T* x;
  const T* dy;
  const W* w;
  T* dx;
};

// Calls f(NormGradValues<T, W>) for the types WithRowAndWeightTypes finds; false where
// it finds none.
template <typename F>
bool WithNormGradValues(ConstTensorRef x, ConstTensorRef dy, ConstTensorRef w, TensorRef dx,
                        F&& f) {
  return WithRowAndWeightTypes(
      {x, dy, dx}, ConstTensorRef(), {w}, [&](auto* type, auto* weight_type) {
        using T = std::remove_pointer_t<decltype(type)>;
        using W = std::remove_pointer_t<decltype(weight_type)>;
        f(NormGradValues<T, W>{static_cast<const T*>(x.data()), static_cast<const T*>(dy.data()),
                               static_cast<const W*>(w.data()), static_cast<T*>(dx.data())});
      });
}

// Calls launch(std::bool_constant<kAdd>{}) with kAdd = `add`: a norm's input-gradient
// kernel instantiated for writing or adding its rows.
template <typename Launch>
void WithAddToDx(bool add, const Launch& launch) {
  if (add) {
    launch(std::true_type());
  } else {
    launch(std::false_type());
  }
}

// A norm's input-gradient row: written, or with kAdd added into (AddingRowStore).
template <bool kAdd, typename T>
__device__ auto GradientRow(T* row) {
  if constexpr (kAdd) {
    return AddingRowStore<T>{row};
  } else {
    return StoreRow(row);
  }
}

}  // namespace shardwise::cuda::internal

#endif  // SHARDWISE_WORKER_CUDA_STORAGE_ELEMENTS_CUH_
