#include "worker/cuda/attention_graph_evaluator.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace shardwise::cuda {
namespace {

using Index = std::array<int64_t, 4>;

// A tensor's memory: `base` seen through the tensor's dims and strides.
struct Memory {
  double* base = nullptr;
  bool written = false;
};

int64_t Offset(const GraphTensor& tensor, const Index& index) {
  int64_t offset = 0;
  for (int d = 0; d < 4; ++d) offset += index[d] * tensor.strides[d];
  return offset;
}

// Calls `f` for every index of `dims`, last dimension fastest.
template <typename F>
void ForEachIndex(const std::array<int64_t, 4>& dims, F f) {
  Index i{};
  for (i[0] = 0; i[0] < dims[0]; ++i[0]) {
    for (i[1] = 0; i[1] < dims[1]; ++i[1]) {
      for (i[2] = 0; i[2] < dims[2]; ++i[2]) {
        for (i[3] = 0; i[3] < dims[3]; ++i[3]) f(i);
      }
    }
  }
}

// The index of an operand of dims `small` that an index of dims `large` reads: equal
// dimensions map one to one, a dimension of 1 is broadcast, one that divides the other
// maps each group of large / small to one (a K/V head and its query heads).
bool Maps(const std::array<int64_t, 4>& small, const std::array<int64_t, 4>& large) {
  for (int d = 0; d < 4; ++d) {
    if (small[d] <= 0 || large[d] % small[d] != 0) return false;
  }
  return true;
}
Index Mapped(const std::array<int64_t, 4>& small, const std::array<int64_t, 4>& large,
             const Index& index) {
  Index out{};
  for (int d = 0; d < 4; ++d) out[d] = index[d] / (large[d] / small[d]);
  return out;
}

class Evaluator {
 public:
  explicit Evaluator(const AttentionGraph& graph) : graph_(graph), memory_(graph.tensors.size()) {}

  absl::Status Bind(const std::map<AttentionBuffer, double*>& buffers) {
    for (const GraphTensor& tensor : graph_.tensors) {
      Memory& memory = memory_[tensor.uid - 1];
      if (tensor.by_value) {
        storage_.push_back(std::make_unique<double[]>(1));
        storage_.back()[0] = tensor.value;
        memory = {storage_.back().get(), true};
      } else if (!tensor.is_virtual) {
        const auto it = buffers.find(tensor.buffer);
        if (it == buffers.end()) {
          return absl::InvalidArgumentError(absl::StrCat("tensor ", tensor.name, ": buffer ",
                                                         AttentionBufferName(tensor.buffer),
                                                         " not given"));
        }
        memory = {it->second + tensor.offset, !Produced(tensor.uid)};
      }
    }
    return absl::OkStatus();
  }

  absl::Status Run(const GraphOp& op) {
    for (int64_t uid : op.inputs) {
      if (!memory_[uid - 1].written) {
        return absl::FailedPreconditionError(
            absl::StrCat(op.name, ": reads ", graph_.tensor(uid).name, " before it is written"));
      }
    }
    absl::Status status;
    switch (op.kind) {
      case GraphOpKind::kMatmul:
        status = Matmul(op);
        break;
      case GraphOpKind::kPointwise:
        status = Pointwise(op);
        break;
      case GraphOpKind::kReduction:
        status = Reduction(op);
        break;
      case GraphOpKind::kReshape:
        // The same memory through the output's dims and strides.
        memory_[op.output - 1].base = memory_[op.inputs[0] - 1].base;
        break;
    }
    memory_[op.output - 1].written = true;
    return status;
  }

 private:
  bool Produced(int64_t uid) const {
    for (const GraphOp& op : graph_.ops) {
      if (op.output == uid) return true;
    }
    return false;
  }

  // A virtual output gets memory of its own, as large as its strides reach.
  double* Output(int64_t uid) {
    Memory& memory = memory_[uid - 1];
    if (memory.base == nullptr) {
      const GraphTensor& tensor = graph_.tensor(uid);
      int64_t extent = 1;
      for (int d = 0; d < 4; ++d) extent += (tensor.dims[d] - 1) * tensor.strides[d];
      storage_.push_back(std::make_unique<double[]>(extent));
      memory.base = storage_.back().get();
    }
    return memory.base;
  }

  double Read(int64_t uid, const std::array<int64_t, 4>& dims, const Index& index) const {
    const GraphTensor& tensor = graph_.tensor(uid);
    return memory_[uid - 1].base[Offset(tensor, Mapped(tensor.dims, dims, index))];
  }

  absl::Status Shapes(const GraphOp& op, const std::array<int64_t, 4>& small,
                      const std::array<int64_t, 4>& large) const {
    if (Maps(small, large)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(op.name, ": dims do not broadcast"));
  }

  absl::Status Matmul(const GraphOp& op) {
    const GraphTensor& a = graph_.tensor(op.inputs[0]);
    const GraphTensor& b = graph_.tensor(op.inputs[1]);
    const GraphTensor& c = graph_.tensor(op.output);
    if (a.dims[3] != b.dims[2] || a.dims[2] != c.dims[2] || b.dims[3] != c.dims[3]) {
      return absl::InvalidArgumentError(absl::StrCat(op.name, ": product shapes differ"));
    }
    const std::array<int64_t, 4> batch = {c.dims[0], c.dims[1], 1, 1};
    for (const GraphTensor* operand : {&a, &b}) {
      const std::array<int64_t, 4> operand_batch = {operand->dims[0], operand->dims[1], 1, 1};
      if (absl::Status s = Shapes(op, operand_batch, batch); !s.ok()) return s;
    }
    double* out = Output(op.output);
    const int64_t k = a.dims[3];
    ForEachIndex(c.dims, [&](const Index& i) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        const Index ai = {i[0], i[1], i[2], j};
        const Index bi = {i[0], i[1], j, i[3]};
        sum += Read(a.uid, {c.dims[0], c.dims[1], a.dims[2], a.dims[3]}, ai) *
               Read(b.uid, {c.dims[0], c.dims[1], b.dims[2], b.dims[3]}, bi);
      }
      out[Offset(c, i)] = sum;
    });
    return absl::OkStatus();
  }

  static double Apply(const GraphOp& op, const std::vector<double>& x, const Index& index) {
    switch (op.pointwise) {
      case PointwiseMode::kMul:
        return x[0] * x[1];
      case PointwiseMode::kAdd:
        return x[0] + x[1];
      case PointwiseMode::kSub:
        return x[0] - x[1];
      case PointwiseMode::kDiv:
        return x[0] / x[1];
      case PointwiseMode::kExp:
        return std::exp(x[0]);
      case PointwiseMode::kLog:
        return std::log(x[0]);
      case PointwiseMode::kCmpGe:
        return x[0] >= x[1] ? 1 : 0;
      case PointwiseMode::kBinarySelect:
        return x[2] != 0 ? x[0] : x[1];
      case PointwiseMode::kGenIndex:
        return static_cast<double>(index[op.axis]);
      case PointwiseMode::kIdentity:
        return x[0];
    }
    return std::numeric_limits<double>::quiet_NaN();
  }

  absl::Status Pointwise(const GraphOp& op) {
    const GraphTensor& out = graph_.tensor(op.output);
    for (int64_t uid : op.inputs) {
      if (absl::Status s = Shapes(op, graph_.tensor(uid).dims, out.dims); !s.ok()) return s;
    }
    double* base = Output(op.output);
    std::vector<double> x(op.inputs.size());
    ForEachIndex(out.dims, [&](const Index& i) {
      for (size_t n = 0; n < op.inputs.size(); ++n) x[n] = Read(op.inputs[n], out.dims, i);
      base[Offset(out, i)] = Apply(op, x, i);
    });
    return absl::OkStatus();
  }

  absl::Status Reduction(const GraphOp& op) {
    const GraphTensor& in = graph_.tensor(op.inputs[0]);
    const GraphTensor& out = graph_.tensor(op.output);
    if (absl::Status s = Shapes(op, out.dims, in.dims); !s.ok()) return s;
    double* base = Output(op.output);
    const bool max = op.reduction == ReductionMode::kMax;
    ForEachIndex(out.dims, [&](const Index& i) {
      base[Offset(out, i)] = max ? -std::numeric_limits<double>::infinity() : 0.0;
    });
    const double* from = memory_[in.uid - 1].base;
    ForEachIndex(in.dims, [&](const Index& i) {
      double& to = base[Offset(out, Mapped(out.dims, in.dims, i))];
      const double value = from[Offset(in, i)];
      to = max ? std::max(to, value) : to + value;
    });
    return absl::OkStatus();
  }

  const AttentionGraph& graph_;
  std::vector<Memory> memory_;
  std::vector<std::unique_ptr<double[]>> storage_;
};

}  // namespace

absl::Status EvaluateAttentionGraph(const AttentionGraph& graph,
                                    const std::map<AttentionBuffer, double*>& buffers) {
  Evaluator evaluator(graph);
  if (absl::Status status = evaluator.Bind(buffers); !status.ok()) return status;
  for (const GraphOp& op : graph.ops) {
    if (absl::Status status = evaluator.Run(op); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace shardwise::cuda
