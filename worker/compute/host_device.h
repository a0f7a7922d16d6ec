#ifndef SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_
#define SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_

// For the arithmetic both devices share (pointwise.h, fused_attention_rows.h): nvcc
// compiles a SHARDWISE_HOST_DEVICE function for the GPU and the host, the host compiler
// sees a plain inline function. SHARDWISE_UNROLL asks nvcc's device pass to unroll a loop
// (the host compilers do not know the pragma).

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

#endif  // SHARDWISE_WORKER_COMPUTE_HOST_DEVICE_H_
