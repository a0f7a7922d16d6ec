#include "worker/cuda/cudnn_attention_plan.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/cudnn_attention_workspace.h"

namespace shardwise::cuda {
namespace {

// Every tensor is declared to cuDNN as aligned to 16 bytes (its vectorised loads); Run
// refuses a pointer that is not, rather than let a kernel fault or read the wrong bytes.
constexpr int64_t kTensorAlignmentBytes = 16;

cudnnDataType_t DataType(GraphType type) {
  switch (type) {
    case GraphType::kFloat:
      return CUDNN_DATA_FLOAT;
    case GraphType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case GraphType::kHalf:
      return CUDNN_DATA_HALF;
    case GraphType::kInt32:
      return CUDNN_DATA_INT32;
    case GraphType::kBool:
      return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

int64_t ElementBytes(GraphType type) {
  switch (type) {
    case GraphType::kBFloat16:
    case GraphType::kHalf:
      return 2;
    case GraphType::kBool:
      return 1;
    default:
      return 4;
  }
}

cudnnPointwiseMode_t PointwiseModeOf(PointwiseMode mode) {
  switch (mode) {
    case PointwiseMode::kMul:
      return CUDNN_POINTWISE_MUL;
    case PointwiseMode::kAdd:
      return CUDNN_POINTWISE_ADD;
    case PointwiseMode::kSub:
      return CUDNN_POINTWISE_SUB;
    case PointwiseMode::kDiv:
      return CUDNN_POINTWISE_DIV;
    case PointwiseMode::kExp:
      return CUDNN_POINTWISE_EXP;
    case PointwiseMode::kLog:
      return CUDNN_POINTWISE_LOG;
    case PointwiseMode::kCmpGe:
      return CUDNN_POINTWISE_CMP_GE;
    case PointwiseMode::kBinarySelect:
      return CUDNN_POINTWISE_BINARY_SELECT;
    case PointwiseMode::kGenIndex:
      return CUDNN_POINTWISE_GEN_INDEX;
    case PointwiseMode::kIdentity:
      return CUDNN_POINTWISE_IDENTITY;
  }
  return CUDNN_POINTWISE_IDENTITY;
}

absl::StatusOr<BackendDescriptor> TensorDescriptor(const GraphTensor& tensor) {
  ASSIGN_OR_RETURN(BackendDescriptor d, BackendDescriptor::Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const cudnnDataType_t type = DataType(tensor.type);
  const int64_t alignment = kTensorAlignmentBytes;
  const bool is_virtual = tensor.is_virtual;
  const bool by_value = tensor.by_value;
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, tensor.dims.data()));
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, tensor.strides.data()));
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &tensor.uid));
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual));
  if (by_value) {
    RETURN_IF_ERROR(d.Set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value));
  }
  RETURN_IF_ERROR(d.Finalize(absl::StrCat("tensor ", tensor.name)));
  return d;
}

// The operations' descriptors. Each takes the graph's tensors (by uid - 1) and puts the
// settings descriptor it refers to in `kept`, which outlives the plan.
struct OperationParts {
  const GraphOp& op;
  const std::vector<BackendDescriptor>& tensors;
  std::vector<BackendDescriptor>* kept;
  const BackendDescriptor& tensor(int64_t uid) const { return tensors[uid - 1]; }
  cudnnDataType_t compute() const { return DataType(op.compute_type); }
};

absl::StatusOr<BackendDescriptor> MatmulOperation(const OperationParts& parts) {
  const GraphOp& op = parts.op;
  const cudnnDataType_t compute = parts.compute();
  ASSIGN_OR_RETURN(BackendDescriptor settings,
                   BackendDescriptor::Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
  RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  RETURN_IF_ERROR(settings.Finalize(op.name));
  ASSIGN_OR_RETURN(BackendDescriptor d,
                   BackendDescriptor::Make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, parts.tensor(op.inputs[0])));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, parts.tensor(op.inputs[1])));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, parts.tensor(op.output)));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, settings));
  parts.kept->push_back(std::move(settings));
  RETURN_IF_ERROR(d.Finalize(op.name));
  return d;
}

absl::StatusOr<BackendDescriptor> PointwiseOperation(const OperationParts& parts) {
  const GraphOp& op = parts.op;
  const cudnnDataType_t compute = parts.compute();
  ASSIGN_OR_RETURN(BackendDescriptor settings,
                   BackendDescriptor::Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  const cudnnPointwiseMode_t mode = PointwiseModeOf(op.pointwise);
  RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  if (op.pointwise == PointwiseMode::kGenIndex) {
    const int64_t axis = op.axis;
    RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
  }
  RETURN_IF_ERROR(settings.Finalize(op.name));
  ASSIGN_OR_RETURN(BackendDescriptor d,
                   BackendDescriptor::Make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, settings));
  RETURN_IF_ERROR(
      d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, parts.tensor(op.inputs[0])));
  if (op.inputs.size() > 1) {
    RETURN_IF_ERROR(
        d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, parts.tensor(op.inputs[1])));
  }
  if (op.inputs.size() > 2) {  // BINARY_SELECT's mask
    RETURN_IF_ERROR(
        d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, parts.tensor(op.inputs[2])));
  }
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, parts.tensor(op.output)));
  parts.kept->push_back(std::move(settings));
  RETURN_IF_ERROR(d.Finalize(op.name));
  return d;
}

absl::StatusOr<BackendDescriptor> ReductionOperation(const OperationParts& parts) {
  const GraphOp& op = parts.op;
  const cudnnDataType_t compute = parts.compute();
  ASSIGN_OR_RETURN(BackendDescriptor settings,
                   BackendDescriptor::Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
  const cudnnReduceTensorOp_t reduce =
      op.reduction == ReductionMode::kMax ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
  RETURN_IF_ERROR(
      settings.Set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce));
  RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  RETURN_IF_ERROR(settings.Finalize(op.name));
  ASSIGN_OR_RETURN(BackendDescriptor d,
                   BackendDescriptor::Make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
  RETURN_IF_ERROR(
      d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, parts.tensor(op.inputs[0])));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, parts.tensor(op.output)));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, settings));
  parts.kept->push_back(std::move(settings));
  RETURN_IF_ERROR(d.Finalize(op.name));
  return d;
}

absl::StatusOr<BackendDescriptor> ReshapeOperation(const OperationParts& parts) {
  const GraphOp& op = parts.op;
  ASSIGN_OR_RETURN(BackendDescriptor d,
                   BackendDescriptor::Make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, parts.tensor(op.inputs[0])));
  RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, parts.tensor(op.output)));
  RETURN_IF_ERROR(d.Finalize(op.name));
  return d;
}

absl::StatusOr<BackendDescriptor> OperationDescriptor(const OperationParts& parts) {
  switch (parts.op.kind) {
    case GraphOpKind::kMatmul:
      return MatmulOperation(parts);
    case GraphOpKind::kPointwise:
      return PointwiseOperation(parts);
    case GraphOpKind::kReduction:
      return ReductionOperation(parts);
    case GraphOpKind::kReshape:
      return ReshapeOperation(parts);
  }
  return absl::InternalError(absl::StrCat(parts.op.name, ": an operation of no known kind"));
}

// The engine an engine configuration runs.
absl::StatusOr<BackendDescriptor> EngineOf(const BackendDescriptor& config) {
  ASSIGN_OR_RETURN(BackendDescriptor engine,
                   BackendDescriptor::Make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t engine_handle = engine.get();
  int64_t count = 0;
  RETURN_IF_ERROR(CudnnStatus(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_handle),
      "the engine of a configuration"));
  return engine;
}

// Whether `engine` may give different bits from run to run.
absl::StatusOr<bool> Nondeterministic(const BackendDescriptor& engine) {
  int64_t count = 0;
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  RETURN_IF_ERROR(
      CudnnStatus(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                           CUDNN_TYPE_NUMERICAL_NOTE,
                                           CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &count, notes),
                  "an engine's numerical notes"));
  for (int64_t i = 0; i < count; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return true;
  }
  return false;
}

// The engine configurations cuDNN's heuristics (mode A) offer for `graph` on `target`,
// best first.
absl::StatusOr<std::vector<BackendDescriptor>> Configurations(const BackendDescriptor& graph,
                                                              const PlanTarget& target) {
  ASSIGN_OR_RETURN(BackendDescriptor heuristics,
                   BackendDescriptor::Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  RETURN_IF_ERROR(heuristics.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  RETURN_IF_ERROR(heuristics.Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  if (target.device != nullptr) {
    RETURN_IF_ERROR(heuristics.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *target.device));
  }
  RETURN_IF_ERROR(heuristics.Finalize("the engine heuristics"));
  return heuristics.GetDescriptors(CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                   CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "the engine configurations");
}

// The execution plan of `config` on `target`, compiled and finalized.
absl::StatusOr<BackendDescriptor> ExecutionPlan(const BackendDescriptor& config,
                                                const PlanTarget& target) {
  ASSIGN_OR_RETURN(BackendDescriptor plan,
                   BackendDescriptor::Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  if (target.handle != nullptr) {
    RETURN_IF_ERROR(
        plan.Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &target.handle));
  } else {
    RETURN_IF_ERROR(plan.SetDescriptor(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, *target.device));
  }
  RETURN_IF_ERROR(plan.SetDescriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config));
  RETURN_IF_ERROR(plan.Finalize("an execution plan"));
  return plan;
}

// The bytes of the graph's FP32 dQ accumulator (the atomic backward's), or 0.
int64_t AccumulatorBytes(const AttentionGraph& graph) {
  for (const GraphTensor& tensor : graph.tensors) {
    if (tensor.buffer != AttentionBuffer::kDqAccumulator) continue;
    return ElementBytes(tensor.type) * tensor.dims[0] * tensor.dims[1] * tensor.dims[2] *
           tensor.dims[3];
  }
  return 0;
}

// The accumulator starts at the first 256-byte boundary after cuDNN's workspace (the
// memory estimate budgets that alignment: contracts/cudnn_attention_workspace.h).
int64_t AccumulatorOffset(int64_t workspace_bytes) {
  return (workspace_bytes + kCudnnWorkspaceAlignmentBytes - 1) / kCudnnWorkspaceAlignmentBytes *
         kCudnnWorkspaceAlignmentBytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudnnAttentionPlan>> CudnnAttentionPlan::Build(
    AttentionGraph graph, const PlanTarget& target) {
  if ((target.handle == nullptr) == (target.device == nullptr)) {
    return absl::InvalidArgumentError(
        "a cuDNN attention plan is built for a handle or for a device description, one of them");
  }
  std::unique_ptr<CudnnAttentionPlan> plan(new CudnnAttentionPlan());
  plan->graph_ = std::move(graph);
  plan->runnable_ = target.handle != nullptr;
  plan->accumulator_bytes_ = AccumulatorBytes(plan->graph_);
  RETURN_IF_ERROR(plan->BuildGraph(target));
  RETURN_IF_ERROR(plan->ChoosePlan(target));
  return plan;
}

absl::Status CudnnAttentionPlan::BuildGraph(const PlanTarget& target) {
  for (const GraphTensor& tensor : graph_.tensors) {
    ASSIGN_OR_RETURN(BackendDescriptor d, TensorDescriptor(tensor));
    tensors_.push_back(std::move(d));
  }
  std::vector<cudnnBackendDescriptor_t> handles;
  for (const GraphOp& op : graph_.ops) {
    ASSIGN_OR_RETURN(BackendDescriptor d, OperationDescriptor({op, tensors_, &kept_}));
    handles.push_back(d.get());
    operations_.push_back(std::move(d));
  }
  ASSIGN_OR_RETURN(operation_graph_,
                   BackendDescriptor::Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  if (target.handle != nullptr) {
    RETURN_IF_ERROR(operation_graph_.Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                         &target.handle));
  }
  RETURN_IF_ERROR(operation_graph_.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       static_cast<int64_t>(handles.size()), handles.data()));
  return operation_graph_.Finalize("the attention's operation graph");
}

// The first configuration the heuristics rank that builds and, for a deterministic graph,
// is deterministic.
absl::Status CudnnAttentionPlan::ChoosePlan(const PlanTarget& target) {
  ASSIGN_OR_RETURN(std::vector<BackendDescriptor> configs,
                   Configurations(operation_graph_, target));
  int nondeterministic_engines = 0, unread_notes = 0, failed_plans = 0;
  absl::Status last_failure;
  for (BackendDescriptor& config : configs) {
    absl::StatusOr<BackendDescriptor> engine = EngineOf(config);
    absl::StatusOr<bool> nondeterministic =
        engine.ok() ? Nondeterministic(*engine) : absl::StatusOr<bool>(engine.status());
    if (!nondeterministic.ok()) {
      ++unread_notes;
      last_failure = nondeterministic.status();
      continue;
    }
    if (*nondeterministic && graph_.deterministic) {
      ++nondeterministic_engines;
      continue;
    }
    absl::StatusOr<BackendDescriptor> plan = ExecutionPlan(config, target);
    if (!plan.ok()) {
      ++failed_plans;
      last_failure = plan.status();
      continue;
    }
    absl::StatusOr<int64_t> workspace =
        plan->GetInt64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, "an execution plan's workspace");
    if (!workspace.ok()) {
      ++failed_plans;
      last_failure = workspace.status();
      continue;
    }
    workspace_bytes_ = *workspace;
    // Only for the log: a plan that built runs whether or not cuDNN says which engine.
    engine_ =
        engine->GetInt64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, "an engine's global index").value_or(-1);
    plan_ = std::move(*plan);
    engine_config_ = std::move(config);
    return absl::OkStatus();
  }
  return Refusal(configs.size(), nondeterministic_engines, unread_notes, failed_plans,
                 last_failure);
}

// What a first run on a new GPU or cuDNN needs to be told: what was skipped and why, with
// the last plan's failure in cuDNN's words.
absl::Status CudnnAttentionPlan::Refusal(size_t configurations, int nondeterministic, int unread,
                                         int failed, const absl::Status& last_failure) const {
  const std::array<int64_t, 4>& q = graph_.tensors.front().dims;
  return absl::UnimplementedError(absl::StrCat(
      "cuDNN offers no ", graph_.deterministic ? "deterministic " : "",
      "engine that builds for this attention graph (", graph_.ops.size(), " operations, q ", q[0],
      "x", q[1], "x", q[2], "x", q[3], "): ", configurations, " configurations, ", nondeterministic,
      " nondeterministic, ", unread, " whose numerical notes could not be read, ", failed,
      " whose plan did not build",
      last_failure.ok() ? "" : "; the last failure: ", last_failure.message()));
}

int64_t CudnnAttentionPlan::scratch_bytes() const {
  return accumulator_bytes_ > 0 ? AccumulatorOffset(workspace_bytes_) + accumulator_bytes_
                                : workspace_bytes_;
}

absl::Status CudnnAttentionPlan::Execute(cudnnHandle_t handle, Allocator* allocator,
                                         const AttentionPointers& pointers) {
  if (!runnable_) {
    return absl::FailedPreconditionError(
        "cuDNN attention: this plan was built for a description of a GPU, not to run");
  }
  const int64_t scratch = scratch_bytes();
  char* block = scratch > 0 ? static_cast<char*>(allocator->Allocate(static_cast<size_t>(scratch),
                                                                     MemoryCategory::kActivations))
                            : nullptr;
  void* accumulator =
      accumulator_bytes_ > 0 ? block + AccumulatorOffset(workspace_bytes_) : nullptr;
  const absl::Status status =
      Run(handle, pointers, workspace_bytes_ > 0 ? block : nullptr, accumulator);
  // The caching allocator's pools are per stream: the block is reused only by work enqueued
  // after this call's, on the same stream.
  if (block != nullptr) {
    allocator->Free(block, static_cast<size_t>(scratch), MemoryCategory::kActivations);
  }
  return status;
}

absl::Status CudnnAttentionPlan::Run(cudnnHandle_t handle, const AttentionPointers& pointers,
                                     void* workspace, void* accumulator) {
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (GraphTensor& tensor : graph_.tensors) {
    if (tensor.is_virtual) continue;
    void* at = &tensor.value;  // a scalar by value: its host value
    if (!tensor.by_value) {
      void* buffer = accumulator;
      if (tensor.buffer != AttentionBuffer::kDqAccumulator) {
        const auto it = pointers.find(tensor.buffer);
        buffer = it != pointers.end() ? it->second : nullptr;
      }
      if (buffer == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("cuDNN attention: no pointer for buffer ",
                                                       AttentionBufferName(tensor.buffer)));
      }
      at = static_cast<char*>(buffer) + tensor.offset * ElementBytes(tensor.type);
      if (reinterpret_cast<uintptr_t>(at) % kTensorAlignmentBytes != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("cuDNN attention: buffer ", AttentionBufferName(tensor.buffer), " at ",
                         absl::Hex(reinterpret_cast<uintptr_t>(at)), " is not aligned to ",
                         kTensorAlignmentBytes, " bytes"));
      }
    }
    uids.push_back(tensor.uid);
    data.push_back(at);
  }
  ASSIGN_OR_RETURN(BackendDescriptor pack,
                   BackendDescriptor::Make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
  const auto n = static_cast<int64_t>(uids.size());
  RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data()));
  RETURN_IF_ERROR(
      pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, data.data()));
  RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  RETURN_IF_ERROR(pack.Finalize("the variant pack"));
  const absl::Status executed =
      CudnnStatus(cudnnBackendExecute(handle, plan_.get(), pack.get()), "cudnnBackendExecute");
  if (executed.ok()) return executed;
  // A fault of an earlier kernel (sticky) fails the execute too: say what CUDA holds, and
  // take a launch error cuDNN left off the thread, or the next kernel would name it.
  const cudaError_t cuda = cudaGetLastError();
  if (cuda == cudaSuccess) return executed;
  return absl::Status(executed.code(),
                      absl::StrCat(executed.message(), "; CUDA: ", cudaGetErrorString(cuda)));
}

}  // namespace shardwise::cuda
