#include "worker/cuda/cudnn_attention.h"

#include <array>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda/cudnn_requirements.h"

namespace shardwise::cuda {
namespace {

// The status's name and cuDNN's own account of the last failure (cudnnGetLastErrorString:
// which attribute, operation or engine limit it was), which the name alone does not say.
absl::Status CudnnStatus(cudnnStatus_t status, absl::string_view what) {
  if (status == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  return absl::InternalError(absl::StrCat("cuDNN: ", what, ": ", cudnnGetErrorString(status),
                                          detail[0] != '\0' ? " (" : "", detail,
                                          detail[0] != '\0' ? ")" : ""));
}

// An owned backend descriptor.
class Descriptor {
 public:
  static absl::StatusOr<Descriptor> Make(cudnnBackendDescriptorType_t type) {
    Descriptor descriptor;
    RETURN_IF_ERROR(CudnnStatus(cudnnBackendCreateDescriptor(type, &descriptor.handle_),
                                "cudnnBackendCreateDescriptor"));
    return descriptor;
  }
  Descriptor() = default;
  Descriptor(Descriptor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~Descriptor() {
    if (handle_ != nullptr) cudnnBackendDestroyDescriptor(handle_);
  }
  cudnnBackendDescriptor_t get() const { return handle_; }

  absl::Status Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                   int64_t count, const void* values) {
    return CudnnStatus(cudnnBackendSetAttribute(handle_, name, type, count, values),
                       absl::StrCat("cudnnBackendSetAttribute(", static_cast<int>(name), ")"));
  }
  absl::Status SetDescriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t handle = value.get();
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &handle);
  }
  absl::Status Finalize(absl::string_view what) {
    return CudnnStatus(cudnnBackendFinalize(handle_), what);
  }

 private:
  cudnnBackendDescriptor_t handle_ = nullptr;
};

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
  }
  return CUDNN_POINTWISE_IDENTITY;
}

absl::StatusOr<Descriptor> TensorDescriptor(const GraphTensor& tensor) {
  ASSIGN_OR_RETURN(Descriptor d, Descriptor::Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const cudnnDataType_t type = DataType(tensor.type);
  const int64_t alignment = 16;
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

// The operation `op` over `tensors` (by uid - 1); the descriptors it refers to (its
// matmul, pointwise or reduction settings) go to `kept`, which outlives the plan.
absl::StatusOr<Descriptor> OperationDescriptor(const GraphOp& op,
                                               const std::vector<Descriptor>& tensors,
                                               std::vector<Descriptor>* kept) {
  const auto tensor = [&](int64_t uid) -> const Descriptor& { return tensors[uid - 1]; };
  const cudnnDataType_t compute = DataType(op.compute_type);
  switch (op.kind) {
    case GraphOpKind::kMatmul: {
      ASSIGN_OR_RETURN(Descriptor settings, Descriptor::Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR));
      RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
      RETURN_IF_ERROR(settings.Finalize(op.name));
      ASSIGN_OR_RETURN(Descriptor d, Descriptor::Make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensor(op.inputs[0])));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensor(op.inputs[1])));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensor(op.output)));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, settings));
      kept->push_back(std::move(settings));
      RETURN_IF_ERROR(d.Finalize(op.name));
      return d;
    }
    case GraphOpKind::kPointwise: {
      ASSIGN_OR_RETURN(Descriptor settings, Descriptor::Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
      const cudnnPointwiseMode_t mode = PointwiseModeOf(op.pointwise);
      RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
      RETURN_IF_ERROR(
          settings.Set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &compute));
      if (op.pointwise == PointwiseMode::kGenIndex) {
        const int64_t axis = op.axis;
        RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis));
      }
      RETURN_IF_ERROR(settings.Finalize(op.name));
      ASSIGN_OR_RETURN(Descriptor d,
                       Descriptor::Make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, settings));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensor(op.inputs[0])));
      if (op.inputs.size() > 1) {
        RETURN_IF_ERROR(
            d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensor(op.inputs[1])));
      }
      if (op.inputs.size() > 2) {  // BINARY_SELECT's mask
        RETURN_IF_ERROR(
            d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensor(op.inputs[2])));
      }
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensor(op.output)));
      kept->push_back(std::move(settings));
      RETURN_IF_ERROR(d.Finalize(op.name));
      return d;
    }
    case GraphOpKind::kReduction: {
      ASSIGN_OR_RETURN(Descriptor settings, Descriptor::Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR));
      const cudnnReduceTensorOp_t reduce =
          op.reduction == ReductionMode::kMax ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
      RETURN_IF_ERROR(settings.Set(CUDNN_ATTR_REDUCTION_OPERATOR,
                                   CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce));
      RETURN_IF_ERROR(
          settings.Set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
      RETURN_IF_ERROR(settings.Finalize(op.name));
      ASSIGN_OR_RETURN(Descriptor d,
                       Descriptor::Make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensor(op.inputs[0])));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensor(op.output)));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, settings));
      kept->push_back(std::move(settings));
      RETURN_IF_ERROR(d.Finalize(op.name));
      return d;
    }
    case GraphOpKind::kReshape: {
      ASSIGN_OR_RETURN(Descriptor d, Descriptor::Make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensor(op.inputs[0])));
      RETURN_IF_ERROR(d.SetDescriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensor(op.output)));
      RETURN_IF_ERROR(d.Finalize(op.name));
      return d;
    }
  }
  return absl::InternalError(absl::StrCat(op.name, ": an operation of no known kind"));
}

// Whether the engine of `config` may give different bits from run to run.
absl::StatusOr<bool> Nondeterministic(const Descriptor& config) {
  ASSIGN_OR_RETURN(Descriptor engine, Descriptor::Make(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  cudnnBackendDescriptor_t engine_handle = engine.get();
  int64_t count = 0;
  RETURN_IF_ERROR(CudnnStatus(
      cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine_handle),
      "the engine of a configuration"));
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

// The engine configurations cuDNN's heuristics (mode A) offer for `graph`, best first.
absl::StatusOr<std::vector<Descriptor>> Configurations(const Descriptor& graph) {
  ASSIGN_OR_RETURN(Descriptor heuristics, Descriptor::Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  RETURN_IF_ERROR(heuristics.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  RETURN_IF_ERROR(heuristics.Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  RETURN_IF_ERROR(heuristics.Finalize("the engine heuristics"));
  int64_t count = 0;
  RETURN_IF_ERROR(
      CudnnStatus(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
                  "the number of engine configurations"));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> handles;
  for (int64_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(Descriptor config, Descriptor::Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    handles.push_back(config.get());
    configs.push_back(std::move(config));
  }
  RETURN_IF_ERROR(CudnnStatus(
      cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count, handles.data()),
      "the engine configurations"));
  configs.resize(static_cast<size_t>(count));
  return configs;
}

}  // namespace

// One description's execution plan, and the descriptors it was built from.
class CudnnAttention::Plan {
 public:
  static absl::StatusOr<std::unique_ptr<Plan>> Build(cudnnHandle_t handle, AttentionGraph graph);
  absl::Status Execute(cudnnHandle_t handle, Allocator* allocator,
                       const AttentionPointers& pointers);
  int64_t workspace_bytes() const { return workspace_bytes_; }

 private:
  absl::Status BuildGraph(cudnnHandle_t handle);
  absl::Status ChoosePlan(cudnnHandle_t handle);

  AttentionGraph graph_;
  std::vector<Descriptor> tensors_, operations_, kept_;
  Descriptor operation_graph_, plan_;
  int64_t workspace_bytes_ = 0;
};

absl::StatusOr<std::unique_ptr<CudnnAttention::Plan>> CudnnAttention::Plan::Build(
    cudnnHandle_t handle, AttentionGraph graph) {
  std::unique_ptr<Plan> plan(new Plan());
  plan->graph_ = std::move(graph);
  RETURN_IF_ERROR(plan->BuildGraph(handle));
  RETURN_IF_ERROR(plan->ChoosePlan(handle));
  return plan;
}

absl::Status CudnnAttention::Plan::BuildGraph(cudnnHandle_t handle) {
  for (const GraphTensor& tensor : graph_.tensors) {
    ASSIGN_OR_RETURN(Descriptor d, TensorDescriptor(tensor));
    tensors_.push_back(std::move(d));
  }
  std::vector<cudnnBackendDescriptor_t> handles;
  for (const GraphOp& op : graph_.ops) {
    ASSIGN_OR_RETURN(Descriptor d, OperationDescriptor(op, tensors_, &kept_));
    handles.push_back(d.get());
    operations_.push_back(std::move(d));
  }
  ASSIGN_OR_RETURN(operation_graph_, Descriptor::Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  RETURN_IF_ERROR(
      operation_graph_.Set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
  RETURN_IF_ERROR(operation_graph_.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                       static_cast<int64_t>(handles.size()), handles.data()));
  return operation_graph_.Finalize("the attention's operation graph");
}

// The first configuration the heuristics rank that is deterministic and builds. Where
// none does, the refusal counts what was skipped and why, with the last plan's failure in
// cuDNN's words: what a first run on a new GPU or cuDNN needs to be told.
absl::Status CudnnAttention::Plan::ChoosePlan(cudnnHandle_t handle) {
  ASSIGN_OR_RETURN(std::vector<Descriptor> configs, Configurations(operation_graph_));
  int nondeterministic_engines = 0, unread_notes = 0, failed_plans = 0;
  absl::Status last_failure;
  for (const Descriptor& config : configs) {
    absl::StatusOr<bool> nondeterministic = Nondeterministic(config);
    if (!nondeterministic.ok()) {
      ++unread_notes;
      last_failure = nondeterministic.status();
      continue;
    }
    if (*nondeterministic) {
      ++nondeterministic_engines;
      continue;
    }
    ASSIGN_OR_RETURN(Descriptor plan, Descriptor::Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
    RETURN_IF_ERROR(plan.Set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle));
    RETURN_IF_ERROR(plan.SetDescriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config));
    if (absl::Status built = plan.Finalize("an execution plan"); !built.ok()) {
      ++failed_plans;
      last_failure = built;
      continue;
    }
    int64_t count = 0;
    RETURN_IF_ERROR(
        CudnnStatus(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &count, &workspace_bytes_),
                    "an execution plan's workspace"));
    plan_ = std::move(plan);
    return absl::OkStatus();
  }
  const std::array<int64_t, 4>& q = graph_.tensors.front().dims;
  return absl::UnimplementedError(absl::StrCat(
      "cuDNN offers no deterministic engine that builds for this attention graph (",
      graph_.ops.size(), " operations, q ", q[0], "x", q[1], "x", q[2], "x", q[3],
      "): ", configs.size(), " configurations, ", nondeterministic_engines, " nondeterministic, ",
      unread_notes, " whose numerical notes could not be read, ", failed_plans,
      " whose plan did not build",
      last_failure.ok() ? "" : "; the last failure: ", last_failure.message()));
}

absl::Status CudnnAttention::Plan::Execute(cudnnHandle_t handle, Allocator* allocator,
                                           const AttentionPointers& pointers) {
  std::vector<int64_t> uids;
  std::vector<void*> data;
  for (GraphTensor& tensor : graph_.tensors) {
    if (tensor.is_virtual) continue;
    void* at = &tensor.value;  // a scalar by value: its host value
    if (!tensor.by_value) {
      const auto it = pointers.find(tensor.buffer);
      if (it == pointers.end() || it->second == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("cuDNN attention: no pointer for buffer ",
                                                       AttentionBufferName(tensor.buffer)));
      }
      at = static_cast<char*>(it->second) + tensor.offset * ElementBytes(tensor.type);
    }
    uids.push_back(tensor.uid);
    data.push_back(at);
  }
  void* workspace =
      workspace_bytes_ > 0
          ? allocator->Allocate(static_cast<size_t>(workspace_bytes_), MemoryCategory::kActivations)
          : nullptr;
  absl::Status status = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(Descriptor pack, Descriptor::Make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR));
    const auto n = static_cast<int64_t>(uids.size());
    RETURN_IF_ERROR(pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids.data()));
    RETURN_IF_ERROR(
        pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, data.data()));
    RETURN_IF_ERROR(
        pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
    RETURN_IF_ERROR(pack.Finalize("the variant pack"));
    return CudnnStatus(cudnnBackendExecute(handle, plan_.get(), pack.get()), "cudnnBackendExecute");
  }();
  // The caching allocator's pools are per stream: the block is reused only by work enqueued
  // after this call's, on the same stream.
  if (workspace != nullptr) {
    allocator->Free(workspace, static_cast<size_t>(workspace_bytes_), MemoryCategory::kActivations);
  }
  return status;
}

absl::StatusOr<std::unique_ptr<CudnnAttention>> CudnnAttention::Create(cudaStream_t stream,
                                                                       Allocator* allocator) {
  const auto version = static_cast<int64_t>(cudnnGetVersion());
  RETURN_IF_ERROR(CheckCudnnVersion(version));
  cudnnHandle_t handle = nullptr;
  RETURN_IF_ERROR(CudnnStatus(cudnnCreate(&handle), "cudnnCreate"));
  std::unique_ptr<CudnnAttention> attention(new CudnnAttention(handle, allocator, version));
  RETURN_IF_ERROR(CudnnStatus(cudnnSetStream(handle, stream), "cudnnSetStream"));
  return attention;
}

CudnnAttention::CudnnAttention(cudnnHandle_t handle, Allocator* allocator, int64_t version)
    : handle_(handle), allocator_(allocator), version_(version) {}

CudnnAttention::~CudnnAttention() {
  plans_.clear();
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

absl::StatusOr<CudnnAttention::Plan*> CudnnAttention::PlanFor(const AttentionLayout& layout,
                                                              GraphType io, bool backward) {
  auto& plan = plans_[std::make_tuple(layout, io, backward)];
  if (plan == nullptr) {
    AttentionGraph graph =
        backward ? AttentionBackwardGraph(layout, io) : AttentionForwardGraph(layout, io);
    absl::StatusOr<std::unique_ptr<Plan>> built = Plan::Build(handle_, std::move(graph));
    if (!built.ok()) {
      plans_.erase(std::make_tuple(layout, io, backward));
      return built.status();
    }
    plan = std::move(*built);
    // The workspace each call borrows from the caching allocator: the memory estimate's
    // budget for it is checked against this on the GPU.
    LogInfo(LogContext(),
            absl::StrCat("cuDNN attention plan built (", backward ? "backward" : "forward", ", ",
                         layout.batch, " x ", layout.seq, ", ", layout.heads, " heads on ",
                         layout.kv_heads, " K/V heads of ", layout.head_dim, ", ",
                         GraphTypeName(io), "): workspace ", plan->workspace_bytes(), " bytes"));
  }
  return plan.get();
}

absl::Status CudnnAttention::Prepare(const AttentionLayout& layout, GraphType io) {
  RETURN_IF_ERROR(PlanFor(layout, io, /*backward=*/false).status());
  return PlanFor(layout, io, /*backward=*/true).status();
}

absl::Status CudnnAttention::Run(const AttentionLayout& layout, GraphType io, bool backward,
                                 const AttentionPointers& pointers) {
  ASSIGN_OR_RETURN(Plan * plan, PlanFor(layout, io, backward));
  return plan->Execute(handle_, allocator_, pointers);
}

absl::Status CudnnAttention::Forward(const AttentionLayout& layout, GraphType io,
                                     const AttentionPointers& pointers) {
  return Run(layout, io, /*backward=*/false, pointers);
}

absl::Status CudnnAttention::Backward(const AttentionLayout& layout, GraphType io,
                                      const AttentionPointers& pointers) {
  return Run(layout, io, /*backward=*/true, pointers);
}

}  // namespace shardwise::cuda
