#ifndef SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_H_
#define SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_H_

// cuDNN's fused (flash) causal attention as a graph of cuDNN's backend operations, described
// as plain data: its tensors (dims, strides, types, and where each non-virtual one lies in
// the caller's buffers) and the operations between them, in the order they run. Building the
// description is a pure function of the layout, so it builds and is tested without a GPU:
// attention_graph_test runs each graph on the CPU in double (attention_graph_evaluator.h)
// against compute/cpu/fused_attention. The GPU side turns a description into
// cudnnBackend descriptors one to one, and caches the plan per description.
//
// Why a composite graph and not cuDNN's SDPA operation: cuDNN 9.19's
// CUDNN_BACKEND_OPERATION_SDPA_FWD/BWD_DESCRIPTOR have no causal-mask attribute. So the
// causal mask is part of the graph: the scores' row and column indices (GEN_INDEX), a
// comparison, and a select of the lowest float above the diagonal, between the products
// and the softmax's reductions. That is the pattern cuDNN's runtime fusion engine recognises as
// attention and runs as one flash-attention kernel forward and one backward (it is the
// graph NVIDIA's own frontend library builds for causal SDPA on every cuDNN 9 version).
//
// The forward keeps, as the CPU's and the CUDA-core fused attention do, each query row's
// log-sum-exp (`stats`, FP32 [batch, heads, seq]); the backward recomputes the
// probabilities from it. Grouped-query attention is native: a query head h reads K/V head
// h / (heads / kv_heads) (Hugging Face's repeat_kv), through the products' broadcast of a
// head dimension that divides the other's, and the backward sums each K/V head's gradients
// over its group with a reduction, from virtual per-query-head gradients in the operands'
// type (the grouped backward NVIDIA's frontend builds for PyTorch's cuDNN attention). No
// copy of K or V per query head is made.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "worker/compute/attention_shape.h"

namespace shardwise::cuda {

// cuDNN's data types as a graph uses them.
enum class GraphType { kFloat, kBFloat16, kHalf, kInt32, kBool };
const char* GraphTypeName(GraphType type);

// Where Q, K and V lie (each [batch, seq, heads_of_it * head_dim], row-major).
struct AttentionLayout {
  enum class Kind {
    kPackedQkv,  // one buffer qkv [batch, seq, 3 * heads * head_dim]: the GPT's c_attn output
    kSeparate,   // q, k, v apart, k and v with kv_heads heads: the Llama's projections
  };
  Kind kind = Kind::kPackedQkv;
  int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;

  static AttentionLayout Packed(const AttentionShape& shape);
  static AttentionLayout Separate(const AttentionShape& shape, int64_t kv_heads);
  // The layout of q, k and v at `qkv`.
  template <typename Ptr>
  static AttentionLayout Of(const AttentionShape& shape, const QkvSpan<Ptr>& qkv) {
    return qkv.packed ? Packed(shape) : Separate(shape, qkv.kv_heads);
  }

  friend bool operator==(const AttentionLayout& a, const AttentionLayout& b) {
    return a.kind == b.kind && a.batch == b.batch && a.seq == b.seq && a.heads == b.heads &&
           a.kv_heads == b.kv_heads && a.head_dim == b.head_dim;
  }
  template <typename H>
  friend H AbslHashValue(H h, const AttentionLayout& l) {
    return H::combine(std::move(h), l.kind, l.batch, l.seq, l.heads, l.kv_heads, l.head_dim);
  }
};

// The caller's buffers a graph's non-virtual tensors lie in; the GPU side binds each
// tensor to its buffer's device pointer plus the tensor's offset.
enum class AttentionBuffer {
  kNone,   // a virtual tensor or a scalar passed by value
  kQkv,    // packed layout: qkv [batch, seq, 3C]
  kQ,      // separate layout: q [batch, seq, heads * head_dim]
  kK,      // separate layout: k [batch, seq, kv_heads * head_dim]
  kV,      // separate layout: v, as k
  kOut,    // out [batch, seq, heads * head_dim]
  kStats,  // FP32 [batch, heads, seq]: each query row's log-sum-exp
  kDout,   // as out
  kDqkv,   // packed layout: the gradient of qkv
  kDq,     // separate layout: the gradients of q, k, v
  kDk,
  kDv,
  kDots,  // FP32 [batch, heads, seq] working space: each query row's dout . out
  // FP32 [batch, heads, seq, head_dim] working space of the atomic backward: the query
  // gradient's sums, which its kernel adds into with atomics.
  kDqAccumulator,
};
const char* AttentionBufferName(AttentionBuffer buffer);

// One tensor: 4-D dims and strides in elements; a virtual one lives only inside cuDNN's
// kernel. `by_value` tensors are scalars (dims and strides all 1) carrying `value`.
struct GraphTensor {
  int64_t uid = 0;
  std::string name;
  GraphType type = GraphType::kFloat;
  std::array<int64_t, 4> dims{};
  std::array<int64_t, 4> strides{};
  bool is_virtual = true;
  bool by_value = false;
  float value = 0;
  AttentionBuffer buffer = AttentionBuffer::kNone;
  int64_t offset = 0;  // elements from the buffer's start
};

enum class GraphOpKind { kMatmul, kPointwise, kReduction, kReshape };
enum class PointwiseMode {
  kMul,
  kAdd,
  kSub,
  kDiv,
  kExp,
  kLog,
  kCmpGe,
  kBinarySelect,
  kGenIndex,
  kIdentity,
};
enum class ReductionMode { kAdd, kMax };

// One operation. Inputs by uid: a matmul's A [.., m, k] and B [.., k, n] (a head dimension
// that divides the output's is broadcast over groups, one of 1 over all); a pointwise
// operation's one, two or three (BINARY_SELECT: the value where the mask holds, the value
// where it does not, the mask); a reduction's one, whose output keeps each dimension, or
// makes it 1, or divides it (a sum over each group of heads); a reshape's one, whose output
// is the same memory seen through other dims and strides (a transpose).
struct GraphOp {
  std::string name;
  GraphOpKind kind = GraphOpKind::kPointwise;
  PointwiseMode pointwise = PointwiseMode::kMul;
  ReductionMode reduction = ReductionMode::kAdd;
  int axis = 0;  // GEN_INDEX's dimension
  GraphType compute_type = GraphType::kFloat;
  std::vector<int64_t> inputs;
  int64_t output = 0;
};

struct AttentionGraph {
  std::vector<GraphTensor> tensors;  // uid i is tensors[i - 1]
  std::vector<GraphOp> ops;          // in the order they run: each input is made before
  // Whether the graph must run on an engine that repeats bit for bit (all but the atomic
  // backward).
  bool deterministic = true;
  const GraphTensor& tensor(int64_t uid) const { return tensors.at(uid - 1); }
};

// out, stats = causal attention(q, k, v), in `io` (BF16 or FP16) with FP32 scores,
// softmax and statistics.
AttentionGraph AttentionForwardGraph(const AttentionLayout& layout, GraphType io);
// How the backward sums the query gradient over the keys (job: cuda.attention_backward).
enum class AttentionBackwardKind {
  // dQ written by its product, which cuDNN's kernel computes from each head's score
  // gradient kept in 16 bits in its workspace (quadratic in the context): bit for bit
  // the same from run to run.
  kDeterministic,
  // dQ summed in FP32 in `kDqAccumulator` with atomic adds, then written in `io`: working
  // space linear in the context, but the sums' order, and so their last bits, vary.
  kAtomic,
};
const char* AttentionBackwardKindName(AttentionBackwardKind kind);

// The gradients of q, k and v from dout, and the forward's q, k, v, out and stats; `dots`
// is written first (each query row's dout . out) and read by the softmax's backward.
AttentionGraph AttentionBackwardGraph(
    const AttentionLayout& layout, GraphType io,
    AttentionBackwardKind kind = AttentionBackwardKind::kDeterministic);

}  // namespace shardwise::cuda

#endif  // SHARDWISE_WORKER_CUDA_ATTENTION_GRAPH_H_
