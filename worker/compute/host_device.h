#ifndef SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_

// For the arithmetic both devices share (pointwise.h, fused_attention_rows.h): nvcc
// compiles a SHARDWISE_HOST_DEVICE function for the GPU and the host, the host compiler
// sees a plain inline function. SHARDWISE_UNROLL asks nvcc's device pass to unroll a loop
// (the host compilers do not know the pragma).

#include <type_traits>

#ifdef __CUDACC__
#define SHARDWISE_HOST_DEVICE __host__ __device__
#else
#define SHARDWISE_HOST_DEVICE
#endif

#ifdef __CUDA_ARCH__
#define SHARDWISE_UNROLL _Pragma("unroll")
#else
#define SHARDWISE_UNROLL
#endif

namespace shardwise {

// a * b rounded by itself. nvcc contracts a product and an add that follows it in the same
// basic block into one FMA (rounded once), and how it forms the blocks depends on the
// instantiation's code (16-bit loads add conversions), so the same expression could round
// one way in one kernel and the other way in another, or on the CPU. Pinned, every
// instantiation rounds as the host does. The host contracts nothing: the CPU kernels are
// built with -ffp-contract=off (compute/cpu/BUILD; GCC's C++ default would contract), and
// x86-64 without -mfma has no FMA to contract into anyway.
template <typename T>
SHARDWISE_HOST_DEVICE T RoundedProduct(T a, T b) {
#ifdef __CUDA_ARCH__
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  if constexpr (std::is_same_v<T, double>) {
    return __dmul_rn(a, b);
  } else {
    return __fmul_rn(a, b);
  }
#else
  return a * b;
#endif
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_
