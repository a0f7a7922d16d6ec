#ifndef SHARDWISE_CONTRACTS_CUDA_ATTENTION_ROWS_H_
#define SHARDWISE_CONTRACTS_CUDA_ATTENTION_ROWS_H_

// Where Shardwise's CUDA-core fused attention kernel (worker/cuda/fused_attention.h)
// keeps its rows: in registers and shared memory for these head sizes, which is also
// where it reads and writes 16-bit storage itself; at other sizes it accumulates in its
// outputs' memory, FP32 only, so 16-bit storage goes to it through FP32 copies. The
// kernel and the memory estimate, which counts those copies, both read it here.

#include <cstdint>

namespace shardwise {

constexpr bool CudaAttentionHasRegisterRows(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128;
}

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_CUDA_ATTENTION_ROWS_H_
