#include "worker/cuda/attention_graph.h"

#include <limits>

namespace shardwise::cuda {
namespace {

using Dims = std::array<int64_t, 4>;

Dims Contiguous(const Dims& dims) {
  return {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
}

// Where one of q, k, v (or their gradients) lies: a row-major [batch, seq, row] buffer,
// the tensor's heads starting `offset` elements into each row.
struct Place {
  AttentionBuffer buffer;
  int64_t offset;
  int64_t row;
};

struct QkvPlaces {
  Place q, k, v;
};

QkvPlaces Places(const AttentionLayout& layout, bool gradients) {
  const int64_t width = layout.heads * layout.head_dim;
  if (layout.kind == AttentionLayout::Kind::kPackedQkv) {
    const AttentionBuffer buffer = gradients ? AttentionBuffer::kDqkv : AttentionBuffer::kQkv;
    return {{buffer, 0, 3 * width}, {buffer, width, 3 * width}, {buffer, 2 * width, 3 * width}};
  }
  const int64_t kv_width = layout.kv_heads * layout.head_dim;
  return {{gradients ? AttentionBuffer::kDq : AttentionBuffer::kQ, 0, width},
          {gradients ? AttentionBuffer::kDk : AttentionBuffer::kK, 0, kv_width},
          {gradients ? AttentionBuffer::kDv : AttentionBuffer::kV, 0, kv_width}};
}

// Builds a graph's tensors (uids from 1) and operations.
class GraphBuilder {
 public:
  // A tensor in the caller's buffer `place` as [batch, heads, seq, head_dim], or
  // transposed as [batch, heads, head_dim, seq] (K^T and V^T for the products).
  int64_t Heads(const std::string& name, GraphType type, const AttentionLayout& layout,
                int64_t heads, const Place& place, bool transposed) {
    GraphTensor tensor = NewTensor(name, type);
    tensor.dims = {layout.batch, heads, layout.seq, layout.head_dim};
    tensor.strides = {layout.seq * place.row, layout.head_dim, place.row, 1};
    if (transposed) {
      std::swap(tensor.dims[2], tensor.dims[3]);
      std::swap(tensor.strides[2], tensor.strides[3]);
    }
    tensor.is_virtual = false;
    tensor.buffer = place.buffer;
    tensor.offset = place.offset;
    return Add(std::move(tensor));
  }
  // An FP32 [batch, heads, seq, 1] of the caller's: one value per query row.
  int64_t Rows(const std::string& name, const AttentionLayout& layout, AttentionBuffer buffer) {
    return Working(name, {layout.batch, layout.heads, layout.seq, 1}, buffer);
  }
  // An FP32 tensor of `dims`, contiguous, in the caller's `buffer`.
  int64_t Working(const std::string& name, const Dims& dims, AttentionBuffer buffer) {
    GraphTensor tensor = NewTensor(name, GraphType::kFloat);
    tensor.dims = dims;
    tensor.strides = Contiguous(dims);
    tensor.is_virtual = false;
    tensor.buffer = buffer;
    return Add(std::move(tensor));
  }
  int64_t Virtual(const std::string& name, GraphType type, const Dims& dims) {
    return View(name, type, dims, Contiguous(dims));
  }
  int64_t View(const std::string& name, GraphType type, const Dims& dims, const Dims& strides) {
    GraphTensor tensor = NewTensor(name, type);
    tensor.dims = dims;
    tensor.strides = strides;
    return Add(std::move(tensor));
  }
  int64_t Scalar(const std::string& name, float value) {
    GraphTensor tensor = NewTensor(name, GraphType::kFloat);
    tensor.dims = {1, 1, 1, 1};
    tensor.strides = {1, 1, 1, 1};
    tensor.is_virtual = false;
    tensor.by_value = true;
    tensor.value = value;
    return Add(std::move(tensor));
  }

  void Matmul(const std::string& name, int64_t a, int64_t b, int64_t out) {
    GraphOp op = NewOp(name, GraphOpKind::kMatmul, {a, b}, out);
    ops_.push_back(std::move(op));
  }
  // A pointwise operation into a new virtual FP32 tensor of `dims` (or into `out`).
  int64_t Pointwise(const std::string& name, PointwiseMode mode, std::vector<int64_t> inputs,
                    const Dims& dims, GraphType type = GraphType::kFloat,
                    GraphType compute = GraphType::kFloat) {
    const int64_t out = Virtual(name, type, dims);
    PointwiseInto(name, mode, std::move(inputs), out, compute);
    return out;
  }
  void PointwiseInto(const std::string& name, PointwiseMode mode, std::vector<int64_t> inputs,
                     int64_t out, GraphType compute = GraphType::kFloat) {
    GraphOp op = NewOp(name, GraphOpKind::kPointwise, std::move(inputs), out);
    op.pointwise = mode;
    op.compute_type = compute;
    ops_.push_back(std::move(op));
  }
  int64_t GenIndex(const std::string& name, int64_t like, int axis) {
    const int64_t out = Virtual(name, GraphType::kInt32, tensors_[like - 1].dims);
    GraphOp op = NewOp(name, GraphOpKind::kPointwise, {like}, out);
    op.pointwise = PointwiseMode::kGenIndex;
    op.axis = axis;
    op.compute_type = GraphType::kInt32;
    ops_.push_back(std::move(op));
    return out;
  }
  void Reduction(const std::string& name, ReductionMode mode, int64_t in, int64_t out) {
    GraphOp op = NewOp(name, GraphOpKind::kReduction, {in}, out);
    op.reduction = mode;
    ops_.push_back(std::move(op));
  }
  // `in` seen as its last two dimensions swapped (dims and strides), in `type`.
  int64_t Transpose(const std::string& name, int64_t in, GraphType type) {
    Dims dims = tensors_[in - 1].dims;
    Dims strides = tensors_[in - 1].strides;
    std::swap(dims[2], dims[3]);
    std::swap(strides[2], strides[3]);
    const int64_t out = View(name, type, dims, strides);
    ops_.push_back(NewOp(name, GraphOpKind::kReshape, {in}, out));
    return out;
  }
  const Dims& dims(int64_t uid) const { return tensors_[uid - 1].dims; }

  AttentionGraph Take() { return {std::move(tensors_), std::move(ops_)}; }

 private:
  GraphTensor NewTensor(const std::string& name, GraphType type) const {
    GraphTensor tensor;
    tensor.uid = static_cast<int64_t>(tensors_.size()) + 1;
    tensor.name = name;
    tensor.type = type;
    return tensor;
  }
  int64_t Add(GraphTensor tensor) {
    tensors_.push_back(std::move(tensor));
    return tensors_.back().uid;
  }
  static GraphOp NewOp(const std::string& name, GraphOpKind kind, std::vector<int64_t> inputs,
                       int64_t out) {
    GraphOp op;
    op.name = name;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.output = out;
    return op;
  }

  std::vector<GraphTensor> tensors_;
  std::vector<GraphOp> ops_;
};

// The scores q k^T times 1/sqrt(head_dim), FP32 [batch, heads, seq, seq].
int64_t ScaledScores(GraphBuilder& g, int64_t q, int64_t k_transposed, int64_t scale,
                     const AttentionLayout& layout) {
  const Dims dims = {layout.batch, layout.heads, layout.seq, layout.seq};
  const int64_t scores = g.Virtual("scores", GraphType::kFloat, dims);
  g.Matmul("q_kt", q, k_transposed, scores);
  return g.Pointwise("scaled_scores", PointwiseMode::kMul, {scores, scale}, dims);
}

// `scores` with the lowest float where a key comes after its query (column > row): as
// -infinity, it becomes 0 in the softmax's exponential, and it keeps a row's arithmetic
// finite. (NVIDIA's frontend masks with it before cuDNN 9.10 and with -infinity since; a
// causal row always keeps its diagonal, so the two give the same probabilities.)
int64_t CausalMask(GraphBuilder& g, int64_t scores) {
  const Dims dims = g.dims(scores);
  const int64_t row = g.GenIndex("row_index", scores, 2);
  const int64_t column = g.GenIndex("column_index", scores, 3);
  const int64_t keep = g.Pointwise("row_ge_column", PointwiseMode::kCmpGe, {row, column}, dims,
                                   GraphType::kBool, GraphType::kBool);
  const int64_t masked = g.Scalar("masked_score", std::numeric_limits<float>::lowest());
  return g.Pointwise("causal_scores", PointwiseMode::kBinarySelect, {scores, masked, keep}, dims);
}

// A product whose output has `heads` heads, into `out`; where `out` has fewer (a K/V
// gradient under grouped-query attention), through a virtual one per query head in the
// operands' type `io`, contiguous, summed over each group into `out`: the grouped
// backward NVIDIA's frontend builds (and so PyTorch's cuDNN attention runs).
void ProductPerKvHead(GraphBuilder& g, const std::string& name, int64_t a, int64_t b, int64_t out,
                      const AttentionLayout& layout, GraphType io) {
  if (layout.kv_heads == layout.heads) {
    g.Matmul(name, a, b, out);
    return;
  }
  Dims dims = g.dims(out);
  dims[1] = layout.heads;
  const int64_t per_query_head = g.Virtual(name + "_per_query_head", io, dims);
  g.Matmul(name, a, b, per_query_head);
  g.Reduction(name + "_group_sum", ReductionMode::kAdd, per_query_head, out);
}

}  // namespace

const char* GraphTypeName(GraphType type) {
  switch (type) {
    case GraphType::kFloat:
      return "FP32";
    case GraphType::kBFloat16:
      return "BF16";
    case GraphType::kHalf:
      return "FP16";
    case GraphType::kInt32:
      return "INT32";
    case GraphType::kBool:
      return "BOOL";
  }
  return "?";
}

const char* AttentionBufferName(AttentionBuffer buffer) {
  switch (buffer) {
    case AttentionBuffer::kNone:
      return "none";
    case AttentionBuffer::kQkv:
      return "qkv";
    case AttentionBuffer::kQ:
      return "q";
    case AttentionBuffer::kK:
      return "k";
    case AttentionBuffer::kV:
      return "v";
    case AttentionBuffer::kOut:
      return "out";
    case AttentionBuffer::kStats:
      return "stats";
    case AttentionBuffer::kDout:
      return "dout";
    case AttentionBuffer::kDqkv:
      return "dqkv";
    case AttentionBuffer::kDq:
      return "dq";
    case AttentionBuffer::kDk:
      return "dk";
    case AttentionBuffer::kDv:
      return "dv";
    case AttentionBuffer::kDots:
      return "dots";
    case AttentionBuffer::kDqAccumulator:
      return "dq_accumulator";
  }
  return "?";
}

const char* AttentionBackwardKindName(AttentionBackwardKind kind) {
  return kind == AttentionBackwardKind::kAtomic ? "atomic" : "deterministic";
}

AttentionLayout AttentionLayout::Packed(const AttentionShape& shape) {
  return {Kind::kPackedQkv, shape.batch, shape.seq, shape.heads, shape.heads, shape.head_dim};
}

AttentionLayout AttentionLayout::Separate(const AttentionShape& shape, int64_t kv_heads) {
  return {Kind::kSeparate, shape.batch, shape.seq, shape.heads, kv_heads, shape.head_dim};
}

AttentionGraph AttentionForwardGraph(const AttentionLayout& layout, GraphType io) {
  GraphBuilder g;
  const QkvPlaces in = Places(layout, /*gradients=*/false);
  const int64_t q = g.Heads("q", io, layout, layout.heads, in.q, false);
  const int64_t k_transposed = g.Heads("k_transposed", io, layout, layout.kv_heads, in.k, true);
  const int64_t v = g.Heads("v", io, layout, layout.kv_heads, in.v, false);
  const int64_t scale = g.Scalar("scale", AttentionScale<float>(layout.head_dim));

  const int64_t scores = CausalMask(g, ScaledScores(g, q, k_transposed, scale, layout));
  const Dims dims = g.dims(scores);
  const Dims row_dims = {layout.batch, layout.heads, layout.seq, 1};
  const int64_t row_max = g.Virtual("row_max", GraphType::kFloat, row_dims);
  g.Reduction("row_max", ReductionMode::kMax, scores, row_max);
  const int64_t shifted =
      g.Pointwise("shifted_scores", PointwiseMode::kSub, {scores, row_max}, dims);
  const int64_t exps = g.Pointwise("exps", PointwiseMode::kExp, {shifted}, dims);
  const int64_t row_sum = g.Virtual("row_sum", GraphType::kFloat, row_dims);
  g.Reduction("row_sum", ReductionMode::kAdd, exps, row_sum);
  const int64_t log_sum = g.Pointwise("log_row_sum", PointwiseMode::kLog, {row_sum}, row_dims);
  const int64_t stats = g.Rows("stats", layout, AttentionBuffer::kStats);
  g.PointwiseInto("stats", PointwiseMode::kAdd, {row_max, log_sum}, stats);
  // The probabilities in `io`, as the product's operand.
  const int64_t probs = g.Pointwise("probs", PointwiseMode::kDiv, {exps, row_sum}, dims, io);
  const int64_t out = g.Heads("out", io, layout, layout.heads,
                              {AttentionBuffer::kOut, 0, layout.heads * layout.head_dim}, false);
  g.Matmul("probs_v", probs, v, out);
  return g.Take();
}

AttentionGraph AttentionBackwardGraph(const AttentionLayout& layout, GraphType io,
                                      AttentionBackwardKind kind) {
  GraphBuilder g;
  const QkvPlaces in = Places(layout, /*gradients=*/false);
  const QkvPlaces grad = Places(layout, /*gradients=*/true);
  const Place out_place = {AttentionBuffer::kOut, 0, layout.heads * layout.head_dim};
  const Place dout_place = {AttentionBuffer::kDout, 0, out_place.row};
  const int64_t q = g.Heads("q", io, layout, layout.heads, in.q, false);
  const int64_t k_transposed = g.Heads("k_transposed", io, layout, layout.kv_heads, in.k, true);
  const int64_t v_transposed = g.Heads("v_transposed", io, layout, layout.kv_heads, in.v, true);
  const int64_t out = g.Heads("out", io, layout, layout.heads, out_place, false);
  const int64_t dout = g.Heads("dout", io, layout, layout.heads, dout_place, false);
  const int64_t stats = g.Rows("stats", layout, AttentionBuffer::kStats);
  const int64_t scale = g.Scalar("scale", AttentionScale<float>(layout.head_dim));

  // dots = sum over the head's columns of dout * out, one per query row: reduced into a
  // virtual tensor, then written times one, as NVIDIA's frontend builds it ("one_tensor
  // is needed for non-dropout graphs": the runtime fusion engine matches that pattern).
  const int64_t products = g.Pointwise("dout_out", PointwiseMode::kMul, {dout, out}, g.dims(dout));
  const int64_t dot_sums =
      g.Virtual("dot_sums", GraphType::kFloat, {layout.batch, layout.heads, layout.seq, 1});
  g.Reduction("dot_sums", ReductionMode::kAdd, products, dot_sums);
  const int64_t dots = g.Rows("dots", layout, AttentionBuffer::kDots);
  g.PointwiseInto("dots", PointwiseMode::kMul, {dot_sums, g.Scalar("one", 1.0f)}, dots);

  // The probabilities again, from the forward's log-sum-exp.
  const int64_t scores = ScaledScores(g, q, k_transposed, scale, layout);
  const Dims dims = g.dims(scores);
  const int64_t shifted = g.Pointwise("shifted_scores", PointwiseMode::kSub, {scores, stats}, dims);
  const int64_t probs = g.Pointwise("probs", PointwiseMode::kExp, {CausalMask(g, shifted)}, dims);

  // dv = P^T dout.
  const int64_t dv = g.Heads("dv", io, layout, layout.kv_heads, grad.v, false);
  ProductPerKvHead(g, "probs_t_dout", g.Transpose("probs_t", probs, io), dout, dv, layout, io);

  // dS = P (dP - dots) / sqrt(head_dim), dP = dout v^T.
  const int64_t dprobs = g.Virtual("dprobs", GraphType::kFloat, dims);
  g.Matmul("dout_vt", dout, v_transposed, dprobs);
  const int64_t centred =
      g.Pointwise("dprobs_minus_dots", PointwiseMode::kSub, {dprobs, dots}, dims);
  const int64_t dscores_unscaled =
      g.Pointwise("dscores_unscaled", PointwiseMode::kMul, {centred, probs}, dims);
  const int64_t dscores =
      g.Pointwise("dscores", PointwiseMode::kMul, {dscores_unscaled, scale}, dims);

  // dk = dS^T q; dq = dS k, directly or through its FP32 accumulator (the pattern cuDNN
  // runs with atomic adds into it, as NVIDIA's frontend builds it).
  const int64_t dk = g.Heads("dk", io, layout, layout.kv_heads, grad.k, false);
  ProductPerKvHead(g, "dscores_t_q", g.Transpose("dscores_t", dscores, io), q, dk, layout, io);
  const int64_t dq = g.Heads("dq", io, layout, layout.heads, grad.q, false);
  const int64_t k = g.Transpose("k", k_transposed, io);
  if (kind == AttentionBackwardKind::kDeterministic) {
    g.Matmul("dscores_k", dscores, k, dq);
    return g.Take();
  }
  const int64_t accumulator =
      g.Working("dq_accumulator", {layout.batch, layout.heads, layout.seq, layout.head_dim},
                AttentionBuffer::kDqAccumulator);
  g.Matmul("dscores_k", dscores, k, accumulator);
  g.PointwiseInto("dq", PointwiseMode::kIdentity, {accumulator}, dq);
  AttentionGraph graph = g.Take();
  graph.deterministic = false;
  return graph;
}

}  // namespace shardwise::cuda
