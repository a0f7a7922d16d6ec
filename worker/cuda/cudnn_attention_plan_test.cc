// cuDNN's own plans for Shardwise's attention graphs, on described GPUs and without one
// (cudnn_device_properties.h): cuDNN 9.19's heuristics and kernel compilation run on the
// CPU, and a stand-in for the driver's loader (fake_cuda_driver.cc) records which kernels
// each plan loads. So this checks, with no GPU, what a GPU run depends on: that cuDNN
// recognises the forward and backward graphs as flash attention (its flash kernels, for the
// GPU's architecture), that a deterministic engine builds for each, and that the backward's
// workspace is what contracts/cudnn_attention_workspace.h says, which the memory estimate
// budgets. What it cannot check is the kernels' arithmetic: cudnn_attention_test on a GPU.

#include "worker/cuda/cudnn_attention_plan.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "contracts/cudnn_attention_workspace.h"
#include "gtest/gtest.h"
#include "worker/cuda/attention_graph.h"
#include "worker/cuda/cudnn_device_properties.h"
#include "worker/cuda/cudnn_requirements.h"

namespace shardwise::cuda {
namespace {

// The stand-in driver, loaded before cuDNN looks for libcuda.so.1 (its soname), and what
// it recorded.
class FakeDriver {
 public:
  // Loads it once; the error is dlerror()'s, empty on success.
  static FakeDriver& Get() {
    static auto* driver = new FakeDriver();
    return *driver;
  }
  const std::string& error() const { return error_; }
  void Reset() { reset_(); }
  std::vector<std::string> Kernels() const {
    std::string names(kernels_(nullptr, 0), '\0');
    kernels_(names.data(), names.size());
    return absl::StrSplit(names.c_str(), '\n', absl::SkipEmpty());
  }

 private:
  FakeDriver() {
    const char* path = std::getenv("SHARDWISE_FAKE_CUDA_DRIVER");
    void* library = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_GLOBAL) : nullptr;
    if (library == nullptr) {
      error_ = path == nullptr ? "SHARDWISE_FAKE_CUDA_DRIVER is not set" : dlerror();
      return;
    }
    reset_ = reinterpret_cast<void (*)()>(dlsym(library, "ShardwiseFakeDriverReset"));
    kernels_ =
        reinterpret_cast<size_t (*)(char*, size_t)>(dlsym(library, "ShardwiseFakeDriverKernels"));
    if (reset_ == nullptr || kernels_ == nullptr)
      error_ = std::string("not the fake driver: ") + path;
  }
  std::string error_;
  void (*reset_)() = nullptr;
  size_t (*kernels_)(char*, size_t) = nullptr;
};

struct Case {
  std::string name;
  GpuProperties gpu;
  AttentionLayout layout;
  GraphType io;
};

std::vector<Case> Cases() {
  const std::vector<std::pair<std::string, AttentionLayout>> layouts = {
      // GPT-2 124M at the benchmark's batch; a context cuDNN's tiles do not divide.
      {"Gpt2", AttentionLayout::Packed({8, 1024, 12, 64})},
      {"GptContext1000", AttentionLayout::Packed({4, 1000, 12, 64})},
      // Llama 3.2 1B's and Llama 3 8B's attention: 32 query heads on 8 K/V heads.
      {"Llama1B", AttentionLayout::Separate({2, 2048, 32, 64}, 8)},
      {"Llama8B", AttentionLayout::Separate({1, 2048, 32, 128}, 8)},
  };
  std::vector<Case> cases;
  for (const GpuProperties& gpu : {H100Sxm(), H200Sxm(), A100Sxm()}) {
    for (const auto& [name, layout] : layouts) {
      for (GraphType io : {GraphType::kBFloat16, GraphType::kHalf}) {
        std::string gpu_name = gpu.name.substr(7, 4);  // "H100", "H200", "A100"
        cases.push_back({gpu_name + name + GraphTypeName(io), gpu, layout, io});
      }
    }
  }
  return cases;
}

bool AnyContains(const std::vector<std::string>& names, const std::string& a,
                 const std::string& b) {
  for (const std::string& name : names) {
    if (name.find(a) != std::string::npos && name.find(b) != std::string::npos) return true;
  }
  return false;
}

// cuDNN plans for a description from 9.8 on; the figures here are 9.19's.
constexpr int64_t kDevicelessVersion = 90800;
// Why these tests cannot run with the cuDNN loaded, or "".
std::string WhyNoDevicelessPlanning() {
  const auto version = static_cast<int64_t>(cudnnGetVersion());
  if (version >= kDevicelessVersion) return "";
  return "cuDNN " + CudnnVersionText(version) +
         " plans only for a GPU it sees; 9.8 or newer plans for a description";
}
#define SKIP_BEFORE_DEVICELESS_PLANNING() \
  if (const std::string why = WhyNoDevicelessPlanning(); !why.empty()) GTEST_SKIP() << why

class CudnnAttentionPlanTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    SKIP_BEFORE_DEVICELESS_PLANNING();
    ASSERT_EQ(FakeDriver::Get().error(), "");
    ASSERT_TRUE(CheckCudnnVersion(static_cast<int64_t>(cudnnGetVersion())).ok());
    absl::StatusOr<BackendDescriptor> device = DeviceProperties(GetParam().gpu);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    architecture_ = "_sm" + std::to_string(GetParam().gpu.compute_capability) + "_";
  }

  // The plan of `graph`, which must load one of cuDNN's `flash_kernel` kernels (flash_fprop
  // or flash_bprop) for the GPU's architecture.
  std::unique_ptr<CudnnAttentionPlan> FlashPlan(AttentionGraph graph, const char* flash_kernel) {
    FakeDriver::Get().Reset();
    absl::StatusOr<std::unique_ptr<CudnnAttentionPlan>> plan =
        CudnnAttentionPlan::Build(std::move(graph), PlanTarget{nullptr, &device_});
    EXPECT_TRUE(plan.ok()) << plan.status();
    const std::vector<std::string> kernels = FakeDriver::Get().Kernels();
    EXPECT_TRUE(AnyContains(kernels, flash_kernel, architecture_))
        << "kernels: " << absl::StrJoin(kernels, ", ");
    return plan.ok() ? std::move(*plan) : nullptr;
  }

  BackendDescriptor device_;
  std::string architecture_;
};

TEST_P(CudnnAttentionPlanTest, ForwardIsFlashAttentionWithoutWorkspace) {
  const Case& c = GetParam();
  std::unique_ptr<CudnnAttentionPlan> plan =
      FlashPlan(AttentionForwardGraph(c.layout, c.io), "flash_fprop");
  ASSERT_NE(plan, nullptr);
  EXPECT_GE(plan->engine(), 0);
  EXPECT_LE(plan->workspace_bytes(), kCudnnWorkspaceAlignmentBytes);
}

TEST_P(CudnnAttentionPlanTest, BackwardIsFlashAttentionWithTheBudgetedWorkspace) {
  const Case& c = GetParam();
  std::unique_ptr<CudnnAttentionPlan> plan =
      FlashPlan(AttentionBackwardGraph(c.layout, c.io), "flash_bprop");
  ASSERT_NE(plan, nullptr);
  const AttentionLayout& l = c.layout;
  const int64_t budget =
      CudnnAttentionBackwardWorkspaceBytes(l.batch, l.heads, l.kv_heads, l.seq, l.head_dim);
  EXPECT_GE(plan->workspace_bytes(), budget);
  EXPECT_LE(plan->workspace_bytes(), budget + kCudnnWorkspaceAlignmentBytes);
}

// The atomic backward: the same flash kernel, with the FP32 dQ accumulator the plan lends
// beside cuDNN's workspace, linear in the context.
TEST_P(CudnnAttentionPlanTest, AtomicBackwardIsFlashAttentionInLinearScratch) {
  const Case& c = GetParam();
  std::unique_ptr<CudnnAttentionPlan> plan = FlashPlan(
      AttentionBackwardGraph(c.layout, c.io, AttentionBackwardKind::kAtomic), "flash_bprop");
  ASSERT_NE(plan, nullptr);
  const AttentionLayout& l = c.layout;
  const int64_t accumulator = int64_t{4} * l.batch * l.heads * l.seq * l.head_dim;
  EXPECT_GE(plan->scratch_bytes() - plan->workspace_bytes(), accumulator);
  EXPECT_LE(plan->scratch_bytes(),
            CudnnAttentionAtomicBackwardBytes(l.batch, l.heads, l.kv_heads, l.seq, l.head_dim) +
                2 * kCudnnWorkspaceAlignmentBytes);
}

// A plan for a description is for inspection: it refuses to run.
TEST_P(CudnnAttentionPlanTest, APlanForADescriptionDoesNotRun) {
  const Case& c = GetParam();
  std::unique_ptr<CudnnAttentionPlan> plan =
      FlashPlan(AttentionForwardGraph(c.layout, c.io), "flash_fprop");
  ASSERT_NE(plan, nullptr);
  const absl::Status run = plan->Execute(nullptr, nullptr, {});
  EXPECT_EQ(run.code(), absl::StatusCode::kFailedPrecondition) << run;
}

INSTANTIATE_TEST_SUITE_P(DescribedGpus, CudnnAttentionPlanTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// cudnn_requirements.h's head sizes are cuDNN's own: where it says a shape runs, cuDNN
// builds both plans for it on that GPU, and where it refuses one, cuDNN builds no
// deterministic plan for it either (so a job it refuses loses nothing by the CUDA-core
// kernel, and one it accepts does not fall back).
TEST(CudnnRequirements, HeadSizesAreCudnnsOwn) {
  SKIP_BEFORE_DEVICELESS_PLANNING();
  ASSERT_EQ(FakeDriver::Get().error(), "");
  for (const GpuProperties& gpu : {H100Sxm(), A100Sxm()}) {
    absl::StatusOr<BackendDescriptor> device = DeviceProperties(gpu);
    ASSERT_TRUE(device.ok()) << device.status();
    const CudnnFacts facts{static_cast<int64_t>(cudnnGetVersion()), gpu.compute_capability};
    for (int64_t head_dim : {8, 16, 40, 64, 72, 96, 100, 128, 136, 192, 256, 264}) {
      const AttentionLayout layout =
          AttentionLayout::Separate({2, 256, 8, head_dim}, /*kv_heads=*/2);
      const bool accepted = CheckCudnnAttention(facts, layout, GraphType::kBFloat16).ok();
      const PlanTarget target{nullptr, &*device};
      const absl::Status forward =
          CudnnAttentionPlan::Build(AttentionForwardGraph(layout, GraphType::kBFloat16), target)
              .status();
      const absl::Status backward =
          CudnnAttentionPlan::Build(AttentionBackwardGraph(layout, GraphType::kBFloat16), target)
              .status();
      EXPECT_EQ(accepted, forward.ok() && backward.ok())
          << gpu.name << ", head size " << head_dim << ": forward " << forward << "; backward "
          << backward;
    }
  }
}

// Neither a handle nor a description, or both: refused before cuDNN is asked anything.
TEST(CudnnAttentionPlan, NeedsExactlyOneTarget) {
  const AttentionGraph graph =
      AttentionForwardGraph(AttentionLayout::Packed({1, 128, 1, 64}), GraphType::kBFloat16);
  EXPECT_EQ(CudnnAttentionPlan::Build(graph, PlanTarget{}).status().code(),
            absl::StatusCode::kInvalidArgument);
  SKIP_BEFORE_DEVICELESS_PLANNING();
  absl::StatusOr<BackendDescriptor> device = DeviceProperties(H100Sxm());
  ASSERT_TRUE(device.ok()) << device.status();
  // Never used as a handle: the refusal comes first.
  const auto handle = reinterpret_cast<cudnnHandle_t>(&*device);
  EXPECT_EQ(CudnnAttentionPlan::Build(graph, PlanTarget{handle, &*device}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The description carries the GPU's figures in cuDNN's names, and cuDNN accepts it.
TEST(CudnnDeviceProperties, DescribesAGpuInCudnnsOwnForm) {
  SKIP_BEFORE_DEVICELESS_PLANNING();
  GpuProperties gpu = H200Sxm();
  const std::string json = DevicePropertiesJson(gpu);
  EXPECT_NE(json.find("\"deviceVer\":900"), std::string::npos) << json;
  EXPECT_NE(json.find("\"multiProcessorCount\":132"), std::string::npos) << json;
  absl::StatusOr<BackendDescriptor> described = DeviceProperties(gpu);
  EXPECT_TRUE(described.ok()) << described.status();
}

}  // namespace
}  // namespace shardwise::cuda
