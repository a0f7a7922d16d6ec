// The cuDNN attention graphs' descriptions, checked without a GPU: their tensors lie where
// the layouts say, and run on the CPU in double (attention_graph_evaluator.h) they compute
// compute/cpu/fused_attention's causal attention, its log-sum-exp and its gradients, for
// the GPT's packed qkv and the Llama's separate q, k, v, grouped-query attention included.
#include "worker/cuda/attention_graph.h"

#include <map>
#include <set>
#include <vector>

#include "gtest/gtest.h"
#include "worker/cuda/attention_graph_evaluator.h"
#include "worker/cuda/attention_reference.h"

namespace shardwise::cuda {
namespace {

using testing::AttentionResults;
using testing::AttentionValues;

// The graphs scale by the FP32 1/sqrt(head_dim) cuDNN is given, the CPU by the double one:
// they differ by less than 2^-24 relative, which moves these values of order 1 by a few
// 1e-9. A wrong stride, offset, mask or group is off by far more.
void ExpectNear(const std::vector<double>& actual, const std::vector<double>& expected,
                const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i) {
    ASSERT_NEAR(actual[i], expected[i], 1e-7) << what << "[" << i << "]";
  }
}

const GraphTensor& Named(const AttentionGraph& graph, const std::string& name) {
  for (const GraphTensor& tensor : graph.tensors) {
    if (tensor.name == name && !tensor.is_virtual) return tensor;
  }
  ADD_FAILURE() << "no non-virtual tensor " << name;
  return graph.tensors.front();
}
const GraphTensor& AnyNamed(const AttentionGraph& graph, const std::string& name) {
  for (const GraphTensor& tensor : graph.tensors) {
    if (tensor.name == name) return tensor;
  }
  ADD_FAILURE() << "no tensor " << name;
  return graph.tensors.front();
}

// The two graphs run by the evaluator on the layout's buffers.
AttentionResults FromTheGraphs(const AttentionLayout& l, const AttentionValues& inputs,
                               AttentionBackwardKind kind) {
  const int64_t rows = l.batch * l.seq, width = l.heads * l.head_dim;
  AttentionResults r;
  r.out.resize(rows * width);
  r.stats.resize(l.batch * l.heads * l.seq);
  r.dots.resize(r.stats.size());
  r.dq.resize(inputs.q.size());
  r.dk.resize(inputs.k.size());
  r.dv.resize(inputs.v.size());
  std::vector<double> qkv, dqkv;
  std::vector<double> q = inputs.q, k = inputs.k, v = inputs.v, dout = inputs.dout;
  std::vector<double> dq_accumulator(inputs.q.size());
  std::map<AttentionBuffer, double*> buffers = {
      {AttentionBuffer::kOut, r.out.data()},
      {AttentionBuffer::kStats, r.stats.data()},
      {AttentionBuffer::kDout, dout.data()},
      {AttentionBuffer::kDots, r.dots.data()},
      {AttentionBuffer::kDqAccumulator, dq_accumulator.data()}};
  if (l.kind == AttentionLayout::Kind::kPackedQkv) {
    qkv = testing::PackedQkv(l, inputs);
    dqkv.resize(qkv.size());
    buffers[AttentionBuffer::kQkv] = qkv.data();
    buffers[AttentionBuffer::kDqkv] = dqkv.data();
  } else {
    buffers.insert({{AttentionBuffer::kQ, q.data()},
                    {AttentionBuffer::kK, k.data()},
                    {AttentionBuffer::kV, v.data()},
                    {AttentionBuffer::kDq, r.dq.data()},
                    {AttentionBuffer::kDk, r.dk.data()},
                    {AttentionBuffer::kDv, r.dv.data()}});
  }
  const absl::Status forward =
      EvaluateAttentionGraph(AttentionForwardGraph(l, GraphType::kBFloat16), buffers);
  EXPECT_TRUE(forward.ok()) << forward;
  const absl::Status backward =
      EvaluateAttentionGraph(AttentionBackwardGraph(l, GraphType::kBFloat16, kind), buffers);
  EXPECT_TRUE(backward.ok()) << backward;
  if (l.kind == AttentionLayout::Kind::kPackedQkv) {  // back to q, k, v rows
    for (int64_t row = 0; row < rows; ++row) {
      for (int64_t c = 0; c < width; ++c) {
        r.dq[row * width + c] = dqkv[row * 3 * width + c];
        r.dk[row * width + c] = dqkv[row * 3 * width + width + c];
        r.dv[row * width + c] = dqkv[row * 3 * width + 2 * width + c];
      }
    }
  }
  return r;
}

// Both backwards: the deterministic one and the atomic one, whose dq goes through its
// FP32 accumulator.
void ExpectSameAttention(const AttentionLayout& layout) {
  const AttentionValues inputs = testing::RandomAttentionValues(layout, 1);
  const AttentionResults expected = testing::ReferenceAttention(layout, inputs);
  for (AttentionBackwardKind kind :
       {AttentionBackwardKind::kDeterministic, AttentionBackwardKind::kAtomic}) {
    SCOPED_TRACE(AttentionBackwardKindName(kind));
    const AttentionResults actual = FromTheGraphs(layout, inputs, kind);
    ExpectNear(actual.out, expected.out, "out");
    ExpectNear(actual.stats, expected.stats, "stats");
    ExpectNear(actual.dots, expected.dots, "dots");
    ExpectNear(actual.dq, expected.dq, "dq");
    ExpectNear(actual.dk, expected.dk, "dk");
    ExpectNear(actual.dv, expected.dv, "dv");
  }
}

TEST(AttentionGraphTest, ThePackedLayoutComputesTheCpusAttentionAndGradients) {
  // seq 7: no tile or block of the CPU's divides it.
  ExpectSameAttention(AttentionLayout::Packed({2, 7, 3, 8}));
}

TEST(AttentionGraphTest, TheSeparateLayoutComputesTheCpusAttentionAndGradients) {
  ExpectSameAttention(AttentionLayout::Separate({2, 5, 2, 8}, /*kv_heads=*/2));
}

TEST(AttentionGraphTest, GroupedQueryAttentionReadsEachKvHeadForItsGroup) {
  ExpectSameAttention(AttentionLayout::Separate({2, 6, 4, 8}, /*kv_heads=*/2));
  ExpectSameAttention(AttentionLayout::Separate({1, 9, 6, 8}, /*kv_heads=*/1));  // MQA
}

TEST(AttentionGraphTest, ThePackedLayoutReadsQkvThroughItsRowStride) {
  const AttentionLayout layout = AttentionLayout::Packed({8, 1024, 12, 64});  // GPT-2 124M
  const AttentionGraph graph = AttentionForwardGraph(layout, GraphType::kBFloat16);
  const int64_t row = int64_t{3} * 768;
  const GraphTensor& q = Named(graph, "q");
  EXPECT_EQ(q.buffer, AttentionBuffer::kQkv);
  EXPECT_EQ(q.offset, 0);
  EXPECT_EQ(q.dims, (std::array<int64_t, 4>{8, 12, 1024, 64}));
  EXPECT_EQ(q.strides, (std::array<int64_t, 4>{1024 * row, 64, row, 1}));
  const GraphTensor& k = Named(graph, "k_transposed");
  EXPECT_EQ(k.offset, 768);
  EXPECT_EQ(k.dims, (std::array<int64_t, 4>{8, 12, 64, 1024}));
  EXPECT_EQ(k.strides, (std::array<int64_t, 4>{1024 * row, 64, 1, row}));
  EXPECT_EQ(Named(graph, "v").offset, 2 * 768);
  const GraphTensor& out = Named(graph, "out");
  EXPECT_EQ(out.buffer, AttentionBuffer::kOut);
  EXPECT_EQ(out.strides, (std::array<int64_t, 4>{int64_t{1024} * 768, 64, 768, 1}));
  const GraphTensor& stats = Named(graph, "stats");
  EXPECT_EQ(stats.type, GraphType::kFloat);
  EXPECT_EQ(stats.dims, (std::array<int64_t, 4>{8, 12, 1024, 1}));
  EXPECT_EQ(stats.strides, (std::array<int64_t, 4>{int64_t{12} * 1024, 1024, 1, 1}));
}

TEST(AttentionGraphTest, TheSeparateLayoutReadsKvHeadsOnceWithoutACopy) {
  // A Llama 3 8B-like attention: 32 query heads, 8 K/V heads of 128.
  const AttentionLayout layout = AttentionLayout::Separate({1, 2048, 32, 128}, 8);
  const AttentionGraph forward = AttentionForwardGraph(layout, GraphType::kHalf);
  const GraphTensor& k = Named(forward, "k_transposed");
  EXPECT_EQ(k.buffer, AttentionBuffer::kK);
  EXPECT_EQ(k.dims, (std::array<int64_t, 4>{1, 8, 128, 2048}));
  EXPECT_EQ(k.strides, (std::array<int64_t, 4>{int64_t{2048} * 1024, 128, 1, 1024}));
  EXPECT_EQ(Named(forward, "q").strides,
            (std::array<int64_t, 4>{int64_t{2048} * 4096, 128, 4096, 1}));
  const AttentionGraph backward = AttentionBackwardGraph(layout, GraphType::kHalf);
  const GraphTensor& dv = Named(backward, "dv");
  EXPECT_EQ(dv.buffer, AttentionBuffer::kDv);
  EXPECT_EQ(dv.dims, (std::array<int64_t, 4>{1, 8, 2048, 128}));
  int group_sums = 0;
  for (const GraphOp& op : backward.ops) group_sums += op.kind == GraphOpKind::kReduction;
  EXPECT_EQ(group_sums, 3);  // dots, and dk's and dv's sums over each group
  // Each group's sum reads every query head's gradient from a virtual tensor in the
  // operands' type, contiguous [batch, heads, seq, head_dim], as NVIDIA's frontend lays out
  // its grouped backward: no working space of the caller's.
  for (const char* name : {"probs_t_dout_per_query_head", "dscores_t_q_per_query_head"}) {
    const GraphTensor& per_query_head = AnyNamed(backward, name);
    EXPECT_TRUE(per_query_head.is_virtual) << name;
    EXPECT_EQ(per_query_head.type, GraphType::kHalf) << name;
    EXPECT_EQ(per_query_head.dims, (std::array<int64_t, 4>{1, 32, 2048, 128})) << name;
    EXPECT_EQ(per_query_head.strides,
              (std::array<int64_t, 4>{int64_t{32} * 2048 * 128, int64_t{2048} * 128, 128, 1}))
        << name;
  }
}

// dots (FP32 [batch, heads, seq, 1], the caller's) is written by a product with a scalar
// one from a virtual reduction, the frontend's pattern, not by the reduction itself.
TEST(AttentionGraphTest, DotsAreWrittenTimesOneFromAVirtualSum) {
  const AttentionGraph backward =
      AttentionBackwardGraph(AttentionLayout::Packed({2, 64, 4, 32}), GraphType::kBFloat16);
  const GraphTensor& dots = Named(backward, "dots");
  EXPECT_EQ(dots.buffer, AttentionBuffer::kDots);
  int writers = 0;
  for (const GraphOp& op : backward.ops) {
    if (op.output != dots.uid) continue;
    ++writers;
    EXPECT_EQ(op.kind, GraphOpKind::kPointwise);
    EXPECT_EQ(op.pointwise, PointwiseMode::kMul);
    ASSERT_EQ(op.inputs.size(), 2u);
    EXPECT_TRUE(backward.tensor(op.inputs[0]).is_virtual);
    EXPECT_TRUE(backward.tensor(op.inputs[1]).by_value);
    EXPECT_EQ(backward.tensor(op.inputs[1]).value, 1.0f);
  }
  EXPECT_EQ(writers, 1);
}

TEST(AttentionGraphTest, EveryTensorIsWellFormed) {
  for (const AttentionLayout& layout :
       {AttentionLayout::Packed({2, 64, 4, 32}), AttentionLayout::Separate({2, 64, 4, 32}, 2)}) {
    for (const AttentionGraph& graph :
         {AttentionForwardGraph(layout, GraphType::kBFloat16),
          AttentionBackwardGraph(layout, GraphType::kBFloat16),
          AttentionBackwardGraph(layout, GraphType::kBFloat16, AttentionBackwardKind::kAtomic)}) {
      std::set<std::string> written;
      for (size_t i = 0; i < graph.tensors.size(); ++i) {
        const GraphTensor& tensor = graph.tensors[i];
        EXPECT_EQ(tensor.uid, static_cast<int64_t>(i) + 1);
        EXPECT_EQ(tensor.is_virtual, tensor.buffer == AttentionBuffer::kNone && !tensor.by_value)
            << tensor.name;
        // The caller's 16-bit tensors, and FP32 statistics and accumulator; FP32 inside.
        if (!tensor.is_virtual && !tensor.by_value && tensor.dims[3] != 1 &&
            tensor.buffer != AttentionBuffer::kDqAccumulator) {
          EXPECT_EQ(tensor.type, GraphType::kBFloat16) << tensor.name;
        }
        for (int64_t dim : tensor.dims) EXPECT_GT(dim, 0) << tensor.name;
      }
      for (const GraphOp& op : graph.ops) {
        EXPECT_GE(op.output, 1);
        EXPECT_LE(op.output, static_cast<int64_t>(graph.tensors.size()));
        EXPECT_FALSE(graph.tensor(op.output).by_value) << op.name;
      }
    }
  }
}

// The atomic backward sums dq in an FP32 [batch, heads, seq, head_dim] accumulator of its
// own, contiguous, and copies it into dq in the operands' type; only it may run on an
// engine that does not repeat bit for bit.
TEST(AttentionGraphTest, TheAtomicBackwardSumsDqInItsFp32Accumulator) {
  const AttentionLayout layout = AttentionLayout::Packed({2, 64, 4, 32});
  const AttentionGraph atomic =
      AttentionBackwardGraph(layout, GraphType::kBFloat16, AttentionBackwardKind::kAtomic);
  EXPECT_FALSE(atomic.deterministic);
  EXPECT_TRUE(AttentionBackwardGraph(layout, GraphType::kBFloat16).deterministic);
  EXPECT_TRUE(AttentionForwardGraph(layout, GraphType::kBFloat16).deterministic);
  const GraphTensor& accumulator = Named(atomic, "dq_accumulator");
  EXPECT_EQ(accumulator.type, GraphType::kFloat);
  EXPECT_EQ(accumulator.buffer, AttentionBuffer::kDqAccumulator);
  EXPECT_EQ(accumulator.dims, (std::array<int64_t, 4>{2, 4, 64, 32}));
  EXPECT_EQ(accumulator.strides,
            (std::array<int64_t, 4>{int64_t{4} * 64 * 32, int64_t{64} * 32, 32, 1}));
  const GraphOp& last = atomic.ops.back();
  EXPECT_EQ(last.pointwise, PointwiseMode::kIdentity);
  EXPECT_EQ(last.inputs, std::vector<int64_t>{accumulator.uid});
  EXPECT_EQ(atomic.tensor(last.output).buffer, AttentionBuffer::kDqkv);
}

TEST(AttentionGraphTest, ADescriptionIsAFunctionOfItsLayout) {
  const AttentionLayout a = AttentionLayout::Packed({8, 1024, 12, 64});
  const AttentionLayout b = AttentionLayout::Packed({8, 1024, 12, 64});
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == AttentionLayout::Packed({8, 512, 12, 64}));
  EXPECT_FALSE(a == AttentionLayout::Separate({8, 1024, 12, 64}, 12));
  const AttentionGraph x = AttentionBackwardGraph(a, GraphType::kBFloat16);
  const AttentionGraph y = AttentionBackwardGraph(b, GraphType::kBFloat16);
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    EXPECT_EQ(x.tensors[i].dims, y.tensors[i].dims);
    EXPECT_EQ(x.tensors[i].strides, y.tensors[i].strides);
  }
}

TEST(AttentionGraphTest, TheEvaluatorRefusesABufferNotGiven) {
  const AttentionGraph graph =
      AttentionForwardGraph(AttentionLayout::Packed({1, 2, 1, 8}), GraphType::kBFloat16);
  const absl::Status status = EvaluateAttentionGraph(graph, {});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("qkv"), std::string::npos) << status;
}

}  // namespace
}  // namespace shardwise::cuda
