#ifndef SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_
#define SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_

#include <cmath>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace shardwise {

// The shape of one causal self-attention call: `batch` sequences of `seq` tokens,
// `heads` heads of `head_dim` each (the model's width is heads * head_dim).
struct AttentionShape {
  int64_t batch, seq, heads, head_dim;
  SHARDWISE_HOST_DEVICE int64_t width() const { return heads * head_dim; }
};

// The K/V head query head `head` of `heads` reads where K and V have `kv_heads` (Hugging
// Face's repeat_kv: each K/V head serves heads / kv_heads consecutive query heads).
SHARDWISE_HOST_DEVICE inline int64_t KvHeadOf(int64_t head, int64_t heads, int64_t kv_heads) {
  return head / (heads / kv_heads);
}

// Where one attention call's queries, keys and values lie, each [batch, seq, its heads *
// head_dim] row-major with rows `q_stride` (q) or `kv_stride` (k, v) elements apart; k and
// v have `kv_heads` heads, and query head h reads K/V head h / (heads / kv_heads) (Hugging
// Face's repeat_kv, without its copy). Two layouts exist: the GPT's c_attn output packs
// the three into qkv [rows, 3C] (Packed); the Llama keeps its projections apart, K and V
// with fewer heads under grouped-query attention (Separate). A gradient of q, k and v has
// its input's layout.
//
// `Ptr` is what points at the elements: a pointer (`const float*`, `double*`: the
// kernels) or a typed reference (runtime/tensor_ref.h: the Device interface, whose
// values may be stored in 16 bits); both step by elements with `+`.
template <typename Ptr>
struct QkvSpan {
  Ptr q{}, k{}, v{};
  int64_t q_stride = 0, kv_stride = 0, kv_heads = 0;
  bool packed = true;

  QkvSpan() = default;
  QkvSpan(Ptr q_in, Ptr k_in, Ptr v_in, int64_t q_stride_in, int64_t kv_stride_in,
          int64_t kv_heads_in, bool packed_in)
      : q(q_in),
        k(k_in),
        v(v_in),
        q_stride(q_stride_in),
        kv_stride(kv_stride_in),
        kv_heads(kv_heads_in),
        packed(packed_in) {}
  // The same places through another pointer type that `Other` converts to (read-only,
  // or typed).
  template <typename Other>
  QkvSpan(const QkvSpan<Other>& other)  // NOLINT: as the pointers convert
      : QkvSpan(other.q, other.k, other.v, other.q_stride, other.kv_stride, other.kv_heads,
                other.packed) {}

  // Where head h of sequence b starts: its first row of q, and of its K/V head's k and v
  // (offsets from k and v).
  Ptr QHead(int64_t b, int64_t h, const AttentionShape& shape) const {
    return q + (b * shape.seq * q_stride + h * shape.head_dim);
  }
  int64_t KvHeadOffset(int64_t b, int64_t h, const AttentionShape& shape) const {
    return b * shape.seq * kv_stride + KvHeadOf(h, shape.heads, kv_heads) * shape.head_dim;
  }
  // Whether `other` lies as this does (a gradient as its input).
  template <typename Other>
  bool SameLayout(const QkvSpan<Other>& other) const {
    return q_stride == other.q_stride && kv_stride == other.kv_stride &&
           kv_heads == other.kv_heads && packed == other.packed;
  }
};

// The packed layout: qkv [batch, seq, 3 * heads * head_dim].
template <typename Ptr>
QkvSpan<Ptr> PackedQkvSpan(Ptr qkv, const AttentionShape& shape) {
  const int64_t width = shape.width();
  return {qkv, qkv + width, qkv + 2 * width, 3 * width, 3 * width, shape.heads, true};
}
// Apart: q [batch, seq, heads * head_dim], k and v [batch, seq, kv_heads * head_dim].
template <typename Ptr>
QkvSpan<Ptr> SeparateQkvSpan(Ptr q, Ptr k, Ptr v, const AttentionShape& shape, int64_t kv_heads) {
  return {q, k, v, shape.width(), kv_heads * shape.head_dim, kv_heads, false};
}

// The scores' scale, 1 / sqrt(head_dim), rounded once from double: every attention path
// (cpu/attention, cuda/attention, fused_attention_rows.h) takes it from here, so all scale
// by the same value.
template <typename T>
SHARDWISE_HOST_DEVICE T AttentionScale(int64_t head_dim) {
  return static_cast<T>(1.0 / sqrt(static_cast<double>(head_dim)));
}

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMPUTE_ATTENTION_SHAPE_H_
