#include "worker/compute/cpu/fused_attention.h"

#include "worker/compute/fused_attention_rows.h"

namespace shardwise::cpu {
namespace {

// Calls row(layout, i) for every row i of every head of every sequence.
template <typename RowFn>
void ForEachRow(const AttentionShape& shape, const RowFn& row) {
  for (int64_t b = 0; b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const fused_attention::HeadLayout at{shape, b, h};
      for (int64_t i = 0; i < shape.seq; ++i) row(at, i);
    }
  }
}

}  // namespace

template <typename T>
void FusedAttentionForward(const T* qkv, const AttentionShape& shape, T* out, T* lse) {
  ForEachRow(shape, [&](const fused_attention::HeadLayout& at, int64_t i) {
    fused_attention::ForwardInMemory(at, qkv, i, out, lse);
  });
}

template <typename T>
void FusedAttentionBackward(const T* qkv, const T* out, const T* lse, const T* dout,
                            const AttentionShape& shape, T* dots, T* dqkv) {
  ForEachRow(shape, [&](const fused_attention::HeadLayout& at, int64_t i) {
    fused_attention::QueryGradientInMemory(at, qkv, out, lse, dout, i, dots, dqkv);
  });
  ForEachRow(shape, [&](const fused_attention::HeadLayout& at, int64_t j) {
    fused_attention::KeyValueGradientInMemory(at, qkv, dout, lse, dots, j, j, dqkv);
  });
}

template void FusedAttentionForward(const float*, const AttentionShape&, float*, float*);
template void FusedAttentionForward(const double*, const AttentionShape&, double*, double*);
template void FusedAttentionBackward(const float*, const float*, const float*, const float*,
                                     const AttentionShape&, float*, float*);
template void FusedAttentionBackward(const double*, const double*, const double*, const double*,
                                     const AttentionShape&, double*, double*);

}  // namespace shardwise::cpu
