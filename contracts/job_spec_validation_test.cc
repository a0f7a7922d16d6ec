#include "contracts/job_spec_validation.h"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/testing/scratch.h"
#include "contracts/huggingface_layout.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/model_description.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::JobSpec ValidSpec() {
  v1::JobSpec spec;
  spec.set_name("mlp");
  for (int w : {8, 16, 4}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.set_global_batch_size(8);
  spec.set_steps(10);
  spec.set_world_size(4);
  return spec;
}

struct BadCase {
  std::string what;
  std::function<void(v1::JobSpec*)> mutate;
  std::string expected_message;  // the field and the value must both appear
};

// Names the case in gtest's output instead of dumping its bytes.
void PrintTo(const BadCase& c, std::ostream* os) { *os << c.what; }

class ValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST(Validation, AcceptsMinimalSpec) {
  EXPECT_TRUE(ValidateJobSpec(ValidSpec(), JobLimits{}, nullptr).ok());
}

// What a client checks before it submits: the tunable limits at the most any coordinator
// takes, the fixed ones as they are, so that a model too large to describe is refused
// before it is described (a GPT of 2^31 - 1 layers would take gigabytes).
TEST(Validation, LiftedLimitsKeepTheFixedBoundsAndCapTheTunableOnes) {
  v1::JobSpec layers = ValidSpec();
  layers.mutable_model()->clear_layer_widths();
  layers.mutable_data()->mutable_tokens()->set_train_path("/data/train.bin");
  v1::GptConfig* gpt = layers.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(256), gpt->set_block_size(8), gpt->set_n_head(2), gpt->set_n_embd(8);
  gpt->set_n_layer(2147483647);
  absl::Status status = ValidateJobSpec(layers, LimitsLifted(), nullptr);
  EXPECT_EQ(status.message(), "job.model.gpt.n_layer: 2147483647 exceeds the limit of 1024");

  v1::JobSpec world = ValidSpec();
  world.set_world_size(2147483647);
  status = ValidateJobSpec(world, LimitsLifted(), nullptr);
  EXPECT_EQ(status.message(),
            "job.world_size: 2147483647 exceeds any coordinator's largest limit of 1048576");

  v1::JobSpec restarts = ValidSpec();
  restarts.mutable_restart_policy()->set_max_restarts(1000);
  status = ValidateJobSpec(restarts, LimitsLifted(), nullptr);
  EXPECT_EQ(status.message(), "job.restart_policy.max_restarts: must be in [0, 100], got 1000");

  v1::JobSpec large = ValidSpec();  // what a coordinator may be configured to take
  large.set_world_size(4096);
  large.set_global_batch_size(4096);
  status = ValidateJobSpec(large, LimitsLifted(), nullptr);
  EXPECT_TRUE(status.ok()) << status;
}

// One replica group to start may do with fault tolerance when it may grow: its ranks and
// rows are laid out over max_replicas groups.
TEST(Validation, AcceptsOneGroupThatMayGrow) {
  v1::JobSpec spec = ValidSpec();
  spec.set_world_size(2);
  spec.set_global_batch_size(12);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
  spec.mutable_fsdp()->set_shard_group_size(2);
  spec.mutable_fault_tolerance()->set_max_replicas(3);
  absl::Status status = ValidateJobSpec(spec, JobLimits(), nullptr);
  EXPECT_TRUE(status.ok()) << status;
  spec.mutable_fault_tolerance()->set_max_replicas(0);
  status = ValidateJobSpec(spec, JobLimits(), nullptr);
  EXPECT_NE(status.message().find("needs two or more replicas to train on after a loss, got 1"),
            std::string::npos)
      << status;
}

// A CUDA job whose groups run on Gloo through host memory survives a loss as a CPU job
// does; over NCCL it is refused (the rule list above).
TEST(Validation, AcceptsFaultToleranceOnCudaOverHostStagedGloo) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
  spec.set_device(v1::CUDA);
  spec.mutable_cuda()->set_collectives(v1::CudaOptions::HOST_STAGED_GLOO);
  spec.mutable_fault_tolerance();
  absl::Status status = ValidateJobSpec(spec, JobLimits(), nullptr);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(Validation, AcceptsSpecAfterDefaults) {
  v1::JobSpec spec = ValidSpec();
  ApplyJobSpecDefaults(&spec);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, nullptr);
  EXPECT_TRUE(status.ok()) << status;
}

// init.safetensors_path is read at submission from its header: a tensor the model needs
// that is missing, or of another dtype or shape, is named there, not after the workers
// start; tensors the model does not have are ignored.
TEST(Validation, InitialWeightsAreCheckedAtSubmission) {
  v1::JobSpec spec = ValidSpec();
  const std::string path = testing::ScratchPath("init-submission.safetensors");
  spec.mutable_init()->set_safetensors_path(path);
  auto description = DescribeModel(spec.model());
  ASSERT_TRUE(description.ok());
  TensorMap weights;
  for (const ParameterDesc& param : description->params) {
    weights[param.name] = F32Tensor(param.shape, std::vector<float>(param.numel()).data());
  }
  weights["extra"] = F32Tensor({2}, std::vector<float>(2).data());
  ASSERT_TRUE(WriteSafetensors(path, weights).ok());
  EXPECT_TRUE(ValidateJobSpec(spec, JobLimits{}, CheckReadableFile).ok());

  TensorMap reshaped = weights;
  reshaped["2.weight"] = F32Tensor({4, 8}, std::vector<float>(32).data());
  ASSERT_TRUE(WriteSafetensors(path, reshaped).ok());
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("job.init.safetensors_path: '" + path +
                                  "': tensor '2.weight' is F32 [4, 8], expected F32 [4, 16]"),
            std::string::npos)
      << status;
  TensorMap missing = weights;
  missing.erase("0.bias");
  ASSERT_TRUE(WriteSafetensors(path, missing).ok());
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_NE(status.message().find("'" + path + "' has no tensor '0.bias'"), std::string::npos)
      << status;
  std::ofstream(path, std::ios::trunc) << "not safetensors";
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("job.init.safetensors_path: " + path +
                                  ": not a valid safetensors file"),
            std::string::npos)
      << status;
}

TEST_P(ValidationTest, RejectsWithFieldAndValue) {
  v1::JobSpec spec = ValidSpec();
  GetParam().mutate(&spec);
  JobLimits limits;
  limits.max_world_size = 64;
  PathChecker no_files = [](const std::string&) {
    return absl::NotFoundError("no readable file at this path");
  };
  absl::Status status = ValidateJobSpec(spec, limits, no_files);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << GetParam().what;
  EXPECT_NE(status.message().find(GetParam().expected_message), std::string::npos)
      << "got: " << status.message();
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, ValidationTest,
    ::testing::Values(
        BadCase{"zero world", [](v1::JobSpec* s) { s->set_world_size(0); },
                "job.world_size: must be positive, got 0"},
        BadCase{"fault tolerance with sharded parameters",
                [](v1::JobSpec* s) { s->mutable_fault_tolerance()->set_min_replicas(2); },
                "job.fault_tolerance: needs fsdp.sharding_strategy NO_SHARD or a HYBRID "
                "strategy (a replica of the model per group), got FULL_SHARD: no other rank "
                "holds a lost rank's shard"},
        BadCase{"more replicas than ranks",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
                  s->mutable_fault_tolerance()->set_min_replicas(5);
                },
                "job.fault_tolerance.min_replicas: must be 1 to the job's 4 replicas (0: 1), "
                "got 5"},
        BadCase{"more replicas than shard groups",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
                  s->mutable_fsdp()->set_shard_group_size(2);
                  s->mutable_fault_tolerance()->set_min_replicas(3);
                },
                "job.fault_tolerance.min_replicas: must be 1 to the job's 2 replicas (0: 1), "
                "got 3"},
        BadCase{"one shard group",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(
                      v1::ShardingStrategy::HYBRID_SHARD_ZERO2);
                  s->mutable_fsdp()->set_shard_group_size(4);
                  s->mutable_fault_tolerance();
                },
                "job.fault_tolerance: needs two or more replicas to train on after a loss, got "
                "1 (job.world_size 4 in shard groups of 4)"},
        BadCase{"max_replicas below the initial replicas",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
                  s->mutable_fsdp()->set_shard_group_size(2);
                  s->mutable_fault_tolerance()->set_max_replicas(1);
                },
                "job.fault_tolerance.max_replicas: must be the job's 2 initial replicas (0) to "
                "32 (64 ranks), got 1"},
        BadCase{"max_replicas past the coordinator's ranks",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
                  s->mutable_fsdp()->set_shard_group_size(2);
                  s->mutable_fault_tolerance()->set_max_replicas(2147483647);
                },
                "job.fault_tolerance.max_replicas: must be the job's 2 initial replicas (0) to "
                "32 (64 ranks), got 2147483647"},
        BadCase{"a batch the grown job's ranks cannot split",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD);
                  s->mutable_fsdp()->set_shard_group_size(2);
                  s->mutable_fault_tolerance()->set_max_replicas(3);
                },
                "job.global_batch_size: 8 is not divisible by the job's ranks "
                "(fault_tolerance.max_replicas x ranks per group) 6"},
        BadCase{"fault tolerance over NCCL",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
                  s->set_device(v1::CUDA);
                  s->mutable_fault_tolerance();
                },
                "job.fault_tolerance: covers CUDA jobs with cuda.collectives HOST_STAGED_GLOO "
                "for now, got NCCL"},
        BadCase{"fault tolerance with the loss scaler",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
                  s->mutable_fault_tolerance();
                  s->mutable_grad_scaler()->set_enabled(true);
                },
                "job.fault_tolerance: needs grad_scaler.enabled false, got true"},
        BadCase{"unknown batch rule",
                [](v1::JobSpec* s) {
                  s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD);
                  s->mutable_fault_tolerance()->set_batch(
                      static_cast<v1::FaultTolerance::Batch>(9));
                },
                "job.fault_tolerance.batch: unknown value 9"},
        BadCase{"negative world", [](v1::JobSpec* s) { s->set_world_size(-2); },
                "job.world_size: must be positive, got -2"},
        BadCase{"world over limit", [](v1::JobSpec* s) { s->set_world_size(65); },
                "job.world_size: 65 exceeds this coordinator's limit of 64"},
        BadCase{"unknown device", [](v1::JobSpec* s) { s->set_device(static_cast<v1::DeviceKind>(9)); },
                "job.device: unknown value 9"},
        BadCase{"cuda options on a CPU job",
                [](v1::JobSpec* s) { s->mutable_cuda()->set_allow_tf32(true); },
                "job.cuda: is set, but device is CPU (the default), not CUDA"},
        BadCase{"unknown CUDA collectives",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_collectives(static_cast<v1::CudaOptions::Collectives>(7));
                },
                "job.cuda.collectives: unknown value 7"},
        BadCase{"one width", [](v1::JobSpec* s) { s->mutable_model()->mutable_layer_widths()->Truncate(1); },
                "job.model.layer_widths: needs at least two widths"},
        BadCase{"zero width", [](v1::JobSpec* s) { s->mutable_model()->set_layer_widths(1, 0); },
                "job.model.layer_widths[1]: must be positive, got 0"},
        BadCase{"huge model", [](v1::JobSpec* s) { s->mutable_model()->set_layer_widths(1, 1 << 20); s->mutable_model()->set_layer_widths(0, 1 << 20); },
                "job.model.layer_widths: 1099516870660 parameters exceed this coordinator's limit of 8589934592"},
        BadCase{"unknown activation", [](v1::JobSpec* s) { s->mutable_model()->set_activation(static_cast<v1::Activation>(7)); },
                "job.model.activation: unknown value 7"},
        BadCase{"unknown strategy", [](v1::JobSpec* s) { s->mutable_fsdp()->set_sharding_strategy(static_cast<v1::ShardingStrategy::Value>(42)); },
                "job.fsdp.sharding_strategy: unknown value 42"},
        BadCase{"hybrid without group", [](v1::JobSpec* s) { s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD); },
                "job.fsdp.shard_group_size: must be positive for HYBRID_SHARD, got 0"},
        BadCase{"hybrid group not dividing", [](v1::JobSpec* s) { s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::HYBRID_SHARD_ZERO2); s->mutable_fsdp()->set_shard_group_size(3); },
                "job.fsdp.shard_group_size: 3 does not divide job.world_size 4"},
        BadCase{"group without hybrid", [](v1::JobSpec* s) { s->mutable_fsdp()->set_shard_group_size(2); },
                "job.fsdp.shard_group_size: is only for HYBRID_SHARD"},
        BadCase{"unknown param dtype", [](v1::JobSpec* s) { s->mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(static_cast<v1::Dtype>(12)); },
                "job.fsdp.mixed_precision.param_dtype: unknown value 12 (expected FP32, FP16 or BF16)"},
        BadCase{"unknown prefetch", [](v1::JobSpec* s) { s->mutable_fsdp()->set_backward_prefetch(static_cast<v1::BackwardPrefetch::Value>(5)); },
                "job.fsdp.backward_prefetch: unknown value 5"},
        BadCase{"all-reduce hook on sharded", [](v1::JobSpec* s) { s->mutable_comm_hook()->set_hook(v1::CommHook::ALLREDUCE); },
                "needs fsdp.sharding_strategy NO_SHARD, got FULL_SHARD (the default)"},
        BadCase{"wrapper around compress", [](v1::JobSpec* s) { s->mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::NO_SHARD); s->mutable_comm_hook()->set_hook(v1::CommHook::FP16_COMPRESS); s->mutable_comm_hook()->set_wrapper(v1::CommHook::BF16_WRAPPER); },
                "job.comm_hook.wrapper: BF16_WRAPPER wraps a full-precision hook (ALLREDUCE), got FP16_COMPRESS"},
        BadCase{"no optimizer", [](v1::JobSpec* s) { s->clear_optimizer(); },
                "job.optimizer: must set sgd or adamw"},
        BadCase{"zero lr", [](v1::JobSpec* s) { s->mutable_optimizer()->mutable_sgd()->set_lr(0); },
                "job.optimizer.sgd.lr: must be > 0 and finite, got 0"},
        BadCase{"nan momentum", [](v1::JobSpec* s) { s->mutable_optimizer()->mutable_sgd()->set_momentum(std::nan("")); },
                "job.optimizer.sgd.momentum: must be >= 0 and finite, got nan"},
        BadCase{"nesterov without momentum", [](v1::JobSpec* s) { s->mutable_optimizer()->mutable_sgd()->set_nesterov(true); },
                "job.optimizer.sgd.nesterov: requires momentum > 0 and dampening == 0, got momentum 0"},
        BadCase{"adamw beta", [](v1::JobSpec* s) { s->mutable_optimizer()->mutable_adamw()->set_beta2(1.0); },
                "job.optimizer.adamw.beta2: must be in [0, 1), got 1"},
        BadCase{"negative clip", [](v1::JobSpec* s) { s->mutable_optimizer()->set_max_grad_norm(-1); },
                "job.optimizer.max_grad_norm: must be >= 0 and finite, got -1"},
        BadCase{"unknown loss", [](v1::JobSpec* s) { s->set_loss(static_cast<v1::Loss>(3)); },
                "job.loss: unknown value 3"},
        BadCase{"no data", [](v1::JobSpec* s) { s->clear_data(); },
                "job.data: must set safetensors_path, synthetic or tokens"},
        BadCase{"missing data file", [](v1::JobSpec* s) { s->mutable_data()->set_safetensors_path("/nope/train.safetensors"); },
                "job.data.safetensors_path: '/nope/train.safetensors': no readable file"},
        BadCase{"negative keep", [](v1::JobSpec* s) { s->mutable_output()->set_keep_checkpoints(-1); },
                "job.output.keep_checkpoints: must be >= 0 (0 keeps every one), got -1"},
        BadCase{"keep without checkpoints", [](v1::JobSpec* s) { s->mutable_output()->set_keep_checkpoints(2); },
                "job.output.keep_checkpoints: 2 needs output.checkpoint_interval_steps > 0"},
        BadCase{"an empty checkpoint folder",
                [](v1::JobSpec* s) { s->mutable_init()->set_checkpoint_dir(""); },
                "job.init.checkpoint_dir: must name a folder, got an empty path"},
        BadCase{"missing init file", [](v1::JobSpec* s) { s->mutable_init()->set_safetensors_path("/nope/w.safetensors"); },
                "job.init.safetensors_path: '/nope/w.safetensors'"},
        BadCase{"negative samples", [](v1::JobSpec* s) { s->mutable_data()->mutable_synthetic()->set_num_samples(-5); },
                "job.data.synthetic.num_samples: must be positive, got -5"},
        BadCase{"zero batch", [](v1::JobSpec* s) { s->set_global_batch_size(0); },
                "job.global_batch_size: must be positive, got 0"},
        BadCase{"indivisible batch", [](v1::JobSpec* s) { s->set_global_batch_size(10); },
                "job.global_batch_size: 10 is not divisible by job.world_size 4"},
        BadCase{"batch not divisible by micro-steps", [](v1::JobSpec* s) { s->set_gradient_accumulation_steps(3); },
                "job.global_batch_size: 8 is not divisible by job.world_size x job.gradient_accumulation_steps = 12"},
        BadCase{"zero steps", [](v1::JobSpec* s) { s->set_steps(0); },
                "job.steps: must be positive, got 0"},
        BadCase{"steps whose sequences outnumber an int64",
                [](v1::JobSpec* s) {
                  s->set_global_batch_size(int64_t{1} << 24);
                  s->set_steps(int64_t{1} << 40);
                },
                "job.steps: 1099511627776 steps of global_batch_size 16777216 number more "
                "sequences than an int64 holds: at most 549755813887"},
        BadCase{"negative accumulation", [](v1::JobSpec* s) { s->set_gradient_accumulation_steps(-1); },
                "job.gradient_accumulation_steps: must be positive, got -1"},
        BadCase{"negative loss read interval", [](v1::JobSpec* s) { s->set_loss_read_interval_steps(-2); },
                "job.loss_read_interval_steps: must be 1 to 10000 (0: every step), got -2"},
        BadCase{"huge loss read interval", [](v1::JobSpec* s) { s->set_loss_read_interval_steps(10001); },
                "job.loss_read_interval_steps: must be 1 to 10000 (0: every step), got 10001"},
        BadCase{"negative layers per unit", [](v1::JobSpec* s) { s->mutable_wrap()->set_layers_per_unit(-1); },
                "job.wrap.layers_per_unit: must be positive, got -1"},
        BadCase{"checkpoint without dir", [](v1::JobSpec* s) { s->mutable_output()->set_checkpoint_interval_steps(5); },
                "job.output.checkpoint_dir: must be set when output.checkpoint_interval_steps is 5"},
        BadCase{"long join timeout", [](v1::JobSpec* s) { s->mutable_rendezvous()->set_join_timeout_seconds(3601); },
                "job.rendezvous.join_timeout_seconds: must be 1 to 3600 (0: 30), got 3601"},
        BadCase{"negative join timeout", [](v1::JobSpec* s) { s->mutable_rendezvous()->set_join_timeout_seconds(-5); },
                "job.rendezvous.join_timeout_seconds: must be 1 to 3600 (0: 30), got -5"},
        BadCase{"negative restarts", [](v1::JobSpec* s) { s->mutable_restart_policy()->set_max_restarts(-1); },
                "job.restart_policy.max_restarts: must be in [0, 100], got -1"},
        BadCase{"long name", [](v1::JobSpec* s) { s->set_name(std::string(200, 'a')); },
                "job.name: is 200 characters long"},
        BadCase{"overlap of an unknown parameter",
                [](v1::JobSpec* s) {
                  auto* overlap = s->mutable_optimizer()->mutable_overlap();
                  overlap->set_mode(v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER);
                  overlap->add_params("7.weight");
                },
                "job.optimizer.overlap.params: '7.weight' is not a parameter of this model"},
        BadCase{"overlap with clipping",
                [](v1::JobSpec* s) {
                  s->mutable_optimizer()->mutable_overlap()->set_mode(
                      v1::OptimizerOverlap::IN_BACKWARD);
                  s->mutable_optimizer()->set_max_grad_norm(1.0);
                },
                "job.optimizer.overlap.mode: IN_BACKWARD steps before every gradient exists, so "
                "it cannot be combined with optimizer.max_grad_norm 1"},
        BadCase{"overlap with the loss scaler",
                [](v1::JobSpec* s) {
                  s->mutable_optimizer()->mutable_overlap()->set_mode(
                      v1::OptimizerOverlap::IN_BACKWARD);
                  s->mutable_grad_scaler()->set_enabled(true);
                },
                "job.optimizer.overlap.mode: IN_BACKWARD steps before the loss scaler"},
        BadCase{"scaler backoff of 1",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_backoff_factor(1.0); },
                "job.grad_scaler.backoff_factor: must be in [1.1754943508222875e-38, 1), got 1"},
        // Six digits showed this value as the bound it breaks.
        BadCase{"scaler backoff just below FP32's least normal",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_backoff_factor(1.17549e-38); },
                "job.grad_scaler.backoff_factor: must be in [1.1754943508222875e-38, 1), got "
                "1.17549e-38"},
        BadCase{"scaler backoff that is 0 in FP32",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_backoff_factor(1e-46); },
                "job.grad_scaler.backoff_factor: must be in [1.1754943508222875e-38, 1), got 1e-46"},
        BadCase{"scaler growth below 1",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_growth_factor(0.5); },
                "job.grad_scaler.growth_factor: must be in (1, 3.4028234663852886e+38], got 0.5"},
        BadCase{"scaler growth past FP32",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_growth_factor(1e39); },
                "job.grad_scaler.growth_factor: must be in (1, 3.4028234663852886e+38], got 1e+39"},
        BadCase{"scaler scale past FP32",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_init_scale(1e39); },
                "job.grad_scaler.init_scale: must be in [1.1754943508222875e-38, 3.4028234663852886e+38] (an FP32, as "
                "the scale is kept), got 1e+39"},
        BadCase{"scaler scale that is 0 in FP32",
                [](v1::JobSpec* s) { s->mutable_grad_scaler()->set_init_scale(1e-50); },
                "job.grad_scaler.init_scale: must be in [1.1754943508222875e-38, 3.4028234663852886e+38] (an FP32, as "
                "the scale is kept), got 1e-50"}));

v1::JobSpec WithStrategy(v1::ShardingStrategy::Value strategy) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  return spec;
}

TEST(CommHook, CompressHooksServeEveryNonHybridStrategy) {
  v1::CommHook hook;
  hook.set_hook(v1::CommHook::BF16_COMPRESS);
  for (auto strategy : {v1::ShardingStrategy::FULL_SHARD, v1::ShardingStrategy::SHARD_GRAD_OP,
                        v1::ShardingStrategy::NO_SHARD}) {
    EXPECT_TRUE(ValidateCommHook(hook, WithStrategy(strategy)).ok()) << strategy;
  }
  absl::Status hybrid = ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::HYBRID_SHARD));
  EXPECT_EQ(hybrid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(hybrid.message(),
            "job.comm_hook: BF16_COMPRESS with NO_WRAPPER is not supported with "
            "fsdp.sharding_strategy HYBRID_SHARD (hybrid strategies take no communication hook)");
}

TEST(CommHook, AllReduceHooksNeedNoShard) {
  v1::CommHook hook;
  hook.set_hook(v1::CommHook::MIXED_PRECISION);
  EXPECT_TRUE(ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::NO_SHARD)).ok());
  absl::Status status = ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::SHARD_GRAD_OP));
  EXPECT_EQ(status.message(),
            "job.comm_hook: MIXED_PRECISION with NO_WRAPPER reduces by all-reduce and needs "
            "fsdp.sharding_strategy NO_SHARD, got SHARD_GRAD_OP");
  hook.set_hook(v1::CommHook::ALLREDUCE);
  hook.set_wrapper(v1::CommHook::BF16_WRAPPER);
  EXPECT_TRUE(ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::NO_SHARD)).ok());
  hook.set_hook(v1::CommHook::FP16_COMPRESS);
  EXPECT_EQ(ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::NO_SHARD)).message(),
            "job.comm_hook.wrapper: BF16_WRAPPER wraps a full-precision hook (ALLREDUCE), got "
            "FP16_COMPRESS");
  // A running job's change names the request's field.
  EXPECT_EQ(ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::NO_SHARD), "hook").message(),
            "hook.wrapper: BF16_WRAPPER wraps a full-precision hook (ALLREDUCE), got "
            "FP16_COMPRESS");
  hook.set_hook(static_cast<v1::CommHook::Hook>(42));
  EXPECT_EQ(ValidateCommHook(hook, WithStrategy(v1::ShardingStrategy::NO_SHARD), "hook").message(),
            "hook.hook: unknown value 42 (expected NO_HOOK, ALLREDUCE, FP16_COMPRESS, "
            "BF16_COMPRESS or MIXED_PRECISION)");
}

TEST(CommHook, MixedPrecisionHookUpcastsGradients) {
  v1::JobSpec spec = WithStrategy(v1::ShardingStrategy::NO_SHARD);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_keep_low_precision_grads(true);
  v1::CommHook hook;
  hook.set_hook(v1::CommHook::MIXED_PRECISION);
  EXPECT_EQ(ValidateCommHook(hook, spec).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Defaults, FillPyTorchDefaults) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_optimizer()->mutable_adamw();
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  ApplyJobSpecDefaults(&spec);
  EXPECT_EQ(spec.fsdp().sharding_strategy(), v1::ShardingStrategy::FULL_SHARD);
  EXPECT_EQ(spec.fsdp().backward_prefetch(), v1::BackwardPrefetch::BACKWARD_PRE);
  EXPECT_TRUE(spec.fsdp().limit_all_gathers());
  EXPECT_FALSE(spec.fsdp().forward_prefetch());
  EXPECT_EQ(spec.fsdp().mixed_precision().reduce_dtype(), v1::BF16);
  EXPECT_EQ(spec.model().activation(), v1::RELU);
  EXPECT_TRUE(spec.model().bias());
  EXPECT_EQ(spec.wrap().layers_per_unit(), 1);
  EXPECT_EQ(spec.loss(), v1::CROSS_ENTROPY);
  EXPECT_EQ(spec.gradient_accumulation_steps(), 1);
  EXPECT_EQ(spec.loss_read_interval_steps(), 1);
  EXPECT_EQ(spec.device(), v1::CPU);
  EXPECT_EQ(spec.data().synthetic().num_samples(), kDefaultSyntheticSamples);
  EXPECT_DOUBLE_EQ(spec.optimizer().adamw().lr(), 1e-3);
  EXPECT_DOUBLE_EQ(spec.optimizer().adamw().beta2(), 0.999);
  EXPECT_DOUBLE_EQ(spec.optimizer().adamw().weight_decay(), 1e-2);
  EXPECT_TRUE(spec.init().has_seed());
}

TEST(Defaults, KeepExplicitValues) {
  v1::JobSpec spec = ValidSpec();
  spec.mutable_fsdp()->set_limit_all_gathers(false);
  spec.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  spec.mutable_model()->set_bias(false);
  ApplyJobSpecDefaults(&spec);
  EXPECT_FALSE(spec.fsdp().limit_all_gathers());
  EXPECT_EQ(spec.fsdp().backward_prefetch(), v1::BackwardPrefetch::NONE);
  EXPECT_FALSE(spec.model().bias());
}

// Names are printable text, counted in characters: control characters (which reach
// terminals and break tables) and invalid UTF-8 are refused; 128 characters of any
// script are allowed, though they take more bytes.
TEST(Validation, NamesArePrintableTextCountedInCharacters) {
  v1::JobSpec spec = ValidSpec();
  spec.set_name("run\x1b[2J");
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("job.name: contains the control character U+001B at character 4"),
            std::string::npos)
      << status;
  spec.set_name("a\xc3(");
  EXPECT_NE(ValidateJobSpec(spec, JobLimits{}, nullptr).message().find("not valid UTF-8"),
            std::string::npos);
  spec.set_name("x\xe2\x80\xae");  // U+202E, a right-to-left override
  EXPECT_EQ(ValidateJobSpec(spec, JobLimits{}, nullptr).code(), absl::StatusCode::kInvalidArgument);
  std::string greek;
  for (int i = 0; i < 128; ++i) greek += "\xce\xb1";  // alpha: 2 bytes, 1 character
  spec.set_name(greek);
  EXPECT_TRUE(ValidateJobSpec(spec, JobLimits{}, nullptr).ok());
  spec.set_name(greek + "b");
  EXPECT_NE(ValidateJobSpec(spec, JobLimits{}, nullptr).message().find("is 129 characters long"),
            std::string::npos);
}

// ---- GPT jobs ----

// A token file of `count` uint16 ids in the test's temporary folder.
std::string TokenFile(const std::string& name, int count) {
  std::string path = testing::ScratchPath(name);
  std::ofstream file(path, std::ios::binary);
  const std::vector<uint16_t> ids(count, 1);
  file.write(reinterpret_cast<const char*>(ids.data()), std::streamsize{2} * count);
  return path;
}

v1::JobSpec ValidGptSpec() {
  v1::JobSpec spec;
  v1::GptConfig* gpt = spec.mutable_model()->mutable_gpt();
  gpt->set_vocab_size(256);
  gpt->set_block_size(16);
  gpt->set_n_layer(2);
  gpt->set_n_head(4);
  gpt->set_n_embd(32);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path(TokenFile("train.bin", 100));
  spec.mutable_data()->mutable_tokens()->set_val_path(TokenFile("val.bin", 17));
  spec.set_global_batch_size(8);
  spec.set_steps(10);
  spec.set_world_size(2);
  return spec;
}

// cuDNN's attention where it can apply: a CUDA GPT with FUSED attention in BF16.
TEST(GptValidation, AcceptsCudnnAttentionForAFusedBf16Gpt) {
  v1::JobSpec spec = ValidGptSpec();
  spec.set_device(v1::CUDA);
  spec.mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  spec.mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDNN);
  const absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  spec.mutable_cuda()->set_attention_backward(v1::CudaOptions::ATOMIC);
  const absl::Status atomic = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(atomic.ok()) << atomic;
}

TEST(GptValidation, AcceptsSixteenBitStorageForABf16Job) {
  v1::JobSpec spec = ValidGptSpec();
  spec.set_device(v1::CUDA);
  spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
  spec.mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
  const absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
}

TEST(GptValidation, AcceptsAGptAndItsDefaults) {
  v1::JobSpec spec = ValidGptSpec();
  EXPECT_TRUE(ValidateJobSpec(spec, JobLimits{}, CheckReadableFile).ok());
  ApplyJobSpecDefaults(&spec);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(spec.model().gpt().activation(), v1::GELU);
  EXPECT_TRUE(spec.model().gpt().bias());
  EXPECT_EQ(spec.model().gpt().attention(), v1::GptConfig::MATERIALIZED);
  EXPECT_FALSE(spec.model().has_bias());  // the MLP's fields stay unset
  ASSERT_EQ(spec.wrap().modules_size(), 1);
  EXPECT_EQ(spec.wrap().modules(0), v1::WrapModule::BLOCK);
  EXPECT_EQ(spec.evaluation().batches(), kDefaultEvalBatches);
}

class GptValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(GptValidationTest, RejectsWithFieldAndValue) {
  v1::JobSpec spec = ValidGptSpec();
  GetParam().mutate(&spec);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << GetParam().what;
  EXPECT_NE(status.message().find(GetParam().expected_message), std::string::npos)
      << "got: " << status.message();
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, GptValidationTest,
    ::testing::Values(
        BadCase{"heads do not divide the width",
                [](v1::JobSpec* s) { s->mutable_model()->mutable_gpt()->set_n_head(5); },
                "job.model.gpt.n_embd: 32 is not divisible by model.gpt.n_head 5"},
        BadCase{"more heads than the width",
                [](v1::JobSpec* s) { s->mutable_model()->mutable_gpt()->set_n_head(64); },
                "job.model.gpt.n_head: 64 exceeds model.gpt.n_embd (32), which it must divide"},
        BadCase{"a NUL in a path",
                [](v1::JobSpec* s) {
                  s->mutable_output()->set_final_model_path(std::string("/tmp/model\0.st", 14));
                },
                "job.output.final_model_path: the path '/tmp/model\\u{0000}.st' contains the "
                "control character U+0000 at "
                "character 11"},
        BadCase{"an escape sequence in a path",
                [](v1::JobSpec* s) {
                  s->mutable_data()->mutable_tokens()->set_val_path("/tmp/\x1b[2Jval.bin");
                },
                "job.data.tokens.val_path: the path '/tmp/\\u{001B}[2Jval.bin' contains the "
                "control character U+001B"},
        BadCase{"unknown attention",
                [](v1::JobSpec* s) {
                  s->mutable_model()->mutable_gpt()->set_attention(
                      static_cast<v1::GptConfig::Attention>(5));
                },
                "job.model.gpt.attention: unknown value 5 (expected MATERIALIZED or FUSED)"},
        BadCase{"an unknown fused-attention kernel",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_fused_attention_kernel(
                      static_cast<v1::CudaOptions::FusedAttentionKernel>(9));
                },
                "job.cuda.fused_attention_kernel: unknown value 9 (expected CUDNN or CUDA_CORES)"},
        BadCase{"cuDNN attention for materialised attention",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDNN);
                },
                "job.cuda.fused_attention_kernel: CUDNN applies to cuDNN's attention: FUSED, and "
                "this job's model has no FUSED attention"},
        BadCase{"cuDNN attention in FP32",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
                  s->mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDNN);
                },
                "job.cuda.fused_attention_kernel: CUDNN needs fsdp.mixed_precision.param_dtype "
                "BF16 or FP16 (cuDNN's flash attention has no FP32 kernel), got none (FP32)"},
        BadCase{"cuDNN attention with a head size it has no kernel for",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
                  s->mutable_model()->mutable_gpt()->set_n_embd(100);
                  s->mutable_model()->mutable_gpt()->set_n_head(4);
                  s->mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
                  s->mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDNN);
                },
                "job.cuda.fused_attention_kernel: CUDNN needs a head size that is a multiple of 8 "
                "and at most 256 (128 before Hopper); this model's is 25"},
        BadCase{"an unknown attention backward",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_attention_backward(
                      static_cast<v1::CudaOptions::AttentionBackward>(4));
                },
                "job.cuda.attention_backward: unknown value 4 (expected DETERMINISTIC or "
                "ATOMIC)"},
        BadCase{"the atomic backward for materialised attention",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_attention_backward(v1::CudaOptions::ATOMIC);
                },
                "job.cuda.attention_backward: ATOMIC applies to cuDNN's attention: FUSED, and "
                "this job's model has no FUSED attention"},
        BadCase{"the atomic backward in FP32",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
                  s->mutable_cuda()->set_attention_backward(v1::CudaOptions::ATOMIC);
                },
                "job.cuda.attention_backward: ATOMIC needs fsdp.mixed_precision.param_dtype "
                "BF16 or FP16 (cuDNN's flash attention has no FP32 kernel), got none (FP32)"},
        BadCase{"the atomic backward on CUDA cores",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
                  s->mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v1::BF16);
                  s->mutable_cuda()->set_fused_attention_kernel(v1::CudaOptions::CUDA_CORES);
                  s->mutable_cuda()->set_attention_backward(v1::CudaOptions::ATOMIC);
                },
                "job.cuda.attention_backward: ATOMIC is cuDNN's backward, and "
                "cuda.fused_attention_kernel CUDA_CORES runs Shardwise's own"},
        BadCase{"an unknown storage",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_storage(static_cast<v1::CudaOptions::Storage>(7));
                },
                "job.cuda.storage: unknown value 7 (expected STORAGE_FP32 or "
                "STORAGE_PARAM_DTYPE)"},
        BadCase{"16-bit storage in FP32",
                [](v1::JobSpec* s) {
                  s->set_device(v1::CUDA);
                  s->mutable_cuda()->set_storage(v1::CudaOptions::STORAGE_PARAM_DTYPE);
                },
                "job.cuda.storage: STORAGE_PARAM_DTYPE stores in "
                "fsdp.mixed_precision.param_dtype, which must be BF16 or FP16, got none (FP32)"},
        BadCase{"a SiLU GPT",
                [](v1::JobSpec* s) { s->mutable_model()->mutable_gpt()->set_activation(v1::SILU); },
                "job.model.gpt.activation: must be GELU or GELU_TANH, got SILU"},
        BadCase{"zero vocabulary",
                [](v1::JobSpec* s) { s->mutable_model()->mutable_gpt()->set_vocab_size(0); },
                "job.model.gpt.vocab_size: must be positive, got 0"},
        BadCase{"MLP fields beside the GPT",
                [](v1::JobSpec* s) { s->mutable_model()->add_layer_widths(4); },
                "job.model: sets model.gpt and other kinds' fields"},
        BadCase{"token file shorter than a sequence",
                [](v1::JobSpec* s) {
                  s->mutable_data()->mutable_tokens()->set_val_path(TokenFile("short.bin", 16));
                },
                "job.data.tokens.val_path: '"},
        BadCase{"token file missing",
                [](v1::JobSpec* s) {
                  s->mutable_data()->mutable_tokens()->set_train_path("/nope/train.bin");
                },
                "job.data.tokens.train_path '/nope/train.bin': no such file"},
        BadCase{"no token data", [](v1::JobSpec* s) { s->mutable_data()->mutable_synthetic(); },
                "job.data: model.gpt trains on token files"},
        BadCase{"wrap splits the tied weight",
                [](v1::JobSpec* s) {
                  s->mutable_wrap()->add_modules(v1::WrapModule::BLOCK);
                  s->mutable_wrap()->add_modules(v1::WrapModule::TOKEN_EMBEDDING);
                },
                "job.wrap: this policy puts transformer.wte.weight into its own FSDP unit"},
        BadCase{"MSE on a GPT", [](v1::JobSpec* s) { s->set_loss(v1::MSE); },
                "job.loss: model.gpt trains with CROSS_ENTROPY, got MSE"},
        BadCase{"evaluation without a validation file",
                [](v1::JobSpec* s) {
                  s->mutable_data()->mutable_tokens()->clear_val_path();
                  s->mutable_evaluation()->set_interval_steps(5);
                },
                "job.evaluation: needs a validation file, data.tokens.val_path"},
        BadCase{"decay that ends before the warmup",
                [](v1::JobSpec* s) {
                  auto* schedule = s->mutable_optimizer()->mutable_lr_schedule();
                  schedule->set_decay(v1::LrSchedule::COSINE);
                  schedule->set_warmup_steps(20);
                },
                "job.optimizer.lr_schedule.decay_steps: the decay ends at step 10 (job.steps), "
                "not after the warmup's 20 steps"},
        BadCase{
            "min_lr above lr",
            [](v1::JobSpec* s) { s->mutable_optimizer()->mutable_lr_schedule()->set_min_lr(1); },
            "job.optimizer.lr_schedule.min_lr: must be in [0, lr = 0.001], got 1"},
        BadCase{"unknown overlap parameter",
                [](v1::JobSpec* s) {
                  s->mutable_optimizer()->mutable_overlap()->set_mode(
                      v1::OptimizerOverlap::HOOK_THEN_OPTIMIZER);
                  s->mutable_optimizer()->mutable_overlap()->add_params("0.weight");
                },
                "job.optimizer.overlap.params: '0.weight' is not a parameter of this model "
                "(transformer.wte.weight, transformer.wpe.weight,"}),
    [](const auto& info) {
      std::string name = info.param.what;
      for (char& c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

// A Llama as a user pastes it from a config.json: the fields HF's LlamaConfig defaults
// are left out.
v1::JobSpec ValidLlamaSpec() {
  v1::JobSpec spec = ValidGptSpec();
  spec.mutable_model()->clear_gpt();
  v1::LlamaConfig* llama = spec.mutable_model()->mutable_llama();
  llama->set_vocab_size(256);
  llama->set_hidden_size(32);
  llama->set_intermediate_size(64);
  llama->set_num_hidden_layers(2);
  llama->set_num_attention_heads(4);
  llama->set_num_key_value_heads(2);
  llama->set_max_position_embeddings(16);
  return spec;
}

TEST(LlamaValidation, AcceptsALlamaAndFillsInHuggingFacesDefaults) {
  v1::JobSpec spec = ValidLlamaSpec();
  ASSERT_FALSE(spec.model().has_gpt());
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  ApplyJobSpecDefaults(&spec);
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  const v1::LlamaConfig& llama = spec.model().llama();
  EXPECT_EQ(llama.head_dim(), 8);
  EXPECT_EQ(llama.block_size(), 16);  // max_position_embeddings
  EXPECT_DOUBLE_EQ(llama.rms_norm_eps(), 1e-6);
  EXPECT_DOUBLE_EQ(llama.rope_theta(), 10000);
  EXPECT_FALSE(llama.tie_word_embeddings());
  EXPECT_DOUBLE_EQ(llama.initializer_range(), 0.02);
  EXPECT_EQ(llama.hidden_act(), "silu");
  EXPECT_EQ(llama.attention(), v1::GptConfig::MATERIALIZED);
  ASSERT_EQ(spec.wrap().modules_size(), 1);
  EXPECT_EQ(spec.wrap().modules(0), v1::WrapModule::BLOCK);
}

TEST(LlamaValidation, AnUntiedHeadMayBeAUnitOfItsOwn) {
  v1::JobSpec spec = ValidLlamaSpec();
  spec.mutable_wrap()->add_modules(v1::WrapModule::BLOCK);
  spec.mutable_wrap()->add_modules(v1::WrapModule::LM_HEAD);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  spec.mutable_model()->mutable_llama()->set_tie_word_embeddings(true);
  EXPECT_EQ(ValidateJobSpec(spec, JobLimits{}, CheckReadableFile).code(),
            absl::StatusCode::kInvalidArgument);
}

// A Hugging Face checkpoint is read at submission from its headers and config.json: a
// tensor it lacks is named there, not after the workers start; an export folder holding
// someone's model is refused unless output.overwrite.
TEST(LlamaValidation, HuggingFaceCheckpointsAreCheckedAtSubmission) {
  v1::JobSpec spec = ValidLlamaSpec();
  const std::string dir = testing::ScratchPath("hf-submission");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json") << HuggingFaceConfigJson(spec.model());
  auto description = DescribeModel(spec.model());
  ASSERT_TRUE(description.ok());
  TensorMap weights;
  for (const ParameterDesc& param : description->params) {
    if (param.name == "lm_head.weight") continue;
    weights[param.name] = F32Tensor(param.shape, std::vector<float>(param.numel()).data());
  }
  ASSERT_TRUE(WriteSafetensors(dir + "/model.safetensors", weights).ok());
  spec.mutable_init()->mutable_huggingface()->set_dir(dir);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("job.init.huggingface.dir: '" + dir +
                                  "' has no tensor 'lm_head.weight'"),
            std::string::npos)
      << status;
  spec.mutable_model()->mutable_llama()->set_tie_word_embeddings(true);  // then it needs none
  std::ofstream(dir + "/config.json") << HuggingFaceConfigJson(spec.model());
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_TRUE(status.ok()) << status;
  spec.mutable_output()->set_huggingface_dir(dir);
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists);  // as final_model_path's
  EXPECT_NE(status.message().find("job.output.huggingface_dir: '" + dir +
                                  "/model.safetensors' exists already"),
            std::string::npos)
      << status;
  spec.mutable_output()->set_overwrite(true);
  EXPECT_TRUE(ValidateJobSpec(spec, JobLimits{}, CheckReadableFile).ok());
  // A config.json alone is someone's too; and the final model may not be the export's.
  const std::string export_dir = dir + "-export";
  std::filesystem::create_directories(export_dir);
  std::ofstream(export_dir + "/config.json") << "{}";
  spec.mutable_output()->set_huggingface_dir(export_dir);
  spec.mutable_output()->set_overwrite(false);
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_NE(status.message().find("/config.json' exists already"), std::string::npos) << status;
  spec.mutable_output()->set_final_model_path(export_dir + "/./model.safetensors");
  status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_NE(status.message().find("job.output.final_model_path: '" + export_dir +
                                  "/./model.safetensors' is output.huggingface_dir's"),
            std::string::npos)
      << status;
}

class LlamaValidationTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(LlamaValidationTest, RejectsWithFieldAndValue) {
  v1::JobSpec spec = ValidLlamaSpec();
  GetParam().mutate(&spec);
  absl::Status status = ValidateJobSpec(spec, JobLimits{}, CheckReadableFile);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << GetParam().what;
  EXPECT_NE(status.message().find(GetParam().expected_message), std::string::npos)
      << "got: " << status.message();
}

v1::LlamaConfig* Llama(v1::JobSpec* spec) { return spec->mutable_model()->mutable_llama(); }

INSTANTIATE_TEST_SUITE_P(
    EveryRule, LlamaValidationTest,
    ::testing::Values(
        BadCase{"K/V heads do not divide the heads",
                [](v1::JobSpec* s) { Llama(s)->set_num_key_value_heads(3); },
                "job.model.llama.num_key_value_heads: 3 does not divide "
                "model.llama.num_attention_heads 4"},
        BadCase{"odd head_dim", [](v1::JobSpec* s) { Llama(s)->set_head_dim(7); },
                "job.model.llama.head_dim: must be even (rotary embeddings rotate pairs), got 7"},
        BadCase{"sequences longer than the positions",
                [](v1::JobSpec* s) { Llama(s)->set_block_size(32); },
                "job.model.llama.block_size: 32 exceeds model.llama.max_position_embeddings 16"},
        BadCase{"zero hidden size", [](v1::JobSpec* s) { Llama(s)->set_hidden_size(0); },
                "job.model.llama.hidden_size: must be positive, got 0"},
        BadCase{"an activation other than SiLU",
                [](v1::JobSpec* s) { Llama(s)->set_hidden_act("gelu"); },
                "job.model.llama.hidden_act: 'gelu' is not taken (\"silu\")"},
        BadCase{"an unknown rope scaling",
                [](v1::JobSpec* s) { Llama(s)->mutable_rope_scaling()->set_rope_type("yarn"); },
                "job.model.llama.rope_scaling.rope_type: 'yarn' is not taken"},
        BadCase{"a rope scaling that names no type",
                [](v1::JobSpec* s) { Llama(s)->mutable_rope_scaling()->set_factor(8); },
                "job.model.llama.rope_scaling.rope_type: none given (\"llama3\", or "
                "\"default\" for no scaling;"},
        BadCase{"llama3 scaling without its factors",
                [](v1::JobSpec* s) {
                  Llama(s)->mutable_rope_scaling()->set_rope_type("llama3");
                  Llama(s)->mutable_rope_scaling()->set_factor(8);
                },
                "job.model.llama.rope_scaling: llama3 needs factor > 0, 0 < low_freq_factor < "
                "high_freq_factor, all finite, and original_max_position_embeddings > 0, got "
                "factor 8, low_freq_factor 0"},
        BadCase{"an infinite rope scaling factor",
                [](v1::JobSpec* s) {
                  v1::RopeScaling* scaling = Llama(s)->mutable_rope_scaling();
                  scaling->set_rope_type("llama3");
                  scaling->set_factor(std::numeric_limits<double>::infinity());
                  scaling->set_low_freq_factor(1);
                  scaling->set_high_freq_factor(4);
                  scaling->set_original_max_position_embeddings(8192);
                },
                "got factor inf,"},
        BadCase{"an infinite initializer range",
                [](v1::JobSpec* s) {
                  Llama(s)->set_initializer_range(std::numeric_limits<double>::infinity());
                },
                "job.model.llama.initializer_range: must be >= 0 and finite, got inf"},
        BadCase{"a zero rope theta", [](v1::JobSpec* s) { Llama(s)->set_rope_theta(0); },
                "job.model.llama.rope_theta: must be > 0 and finite, got 0"},
        BadCase{"a negative norm epsilon",
                [](v1::JobSpec* s) { Llama(s)->set_rms_norm_eps(-1e-6); },
                "job.model.llama.rms_norm_eps: must be > 0 and finite, got -1e-06"},
        // Blamed on the field given, not on block_size, which takes its value.
        BadCase{"a negative context the model was made for",
                [](v1::JobSpec* s) {
                  Llama(s)->clear_block_size();
                  Llama(s)->set_max_position_embeddings(-5);
                },
                "job.model.llama.max_position_embeddings: must be positive, got -5"},
        BadCase{"a model context past the limit, standing in for block_size",
                [](v1::JobSpec* s) {
                  Llama(s)->clear_block_size();
                  Llama(s)->set_max_position_embeddings(int64_t{1} << 21);
                },
                "job.model.llama.max_position_embeddings: 2097152 exceeds the limit of 1048576 "
                "on model.llama.block_size, which it stands in for when not given"},
        BadCase{"a loss no enum names, on a Llama",
                [](v1::JobSpec* s) { s->set_loss(static_cast<v1::Loss>(7)); },
                "job.loss: unknown value 7 (expected CROSS_ENTROPY or MSE)"},
        BadCase{
            "an activation named with control characters",
            [](v1::JobSpec* s) { Llama(s)->set_hidden_act("\x1b]0;x\a" + std::string(300, 'a')); },
            "job.model.llama.hidden_act: '\\u{001B}]0;x\\u{0007}aaa"},
        BadCase{"a GPT beside the Llama",
                [](v1::JobSpec* s) { s->mutable_model()->mutable_gpt()->set_n_layer(1); },
                "job.model: sets both model.gpt and model.llama; a model is one kind"},
        BadCase{"heads wider than the limit",
                [](v1::JobSpec* s) { Llama(s)->set_head_dim(1 << 20); },
                "job.model.llama.num_attention_heads: 4 heads of head_dim 1048576 exceed the "
                "width limit"},
        BadCase{"a position embedding wrapped on a Llama",
                [](v1::JobSpec* s) {
                  s->mutable_wrap()->add_modules(v1::WrapModule::BLOCK);
                  s->mutable_wrap()->add_modules(v1::WrapModule::POSITION_EMBEDDING);
                },
                "job.wrap.modules[1]: POSITION_EMBEDDING names no module of this model"},
        BadCase{"MSE on a Llama", [](v1::JobSpec* s) { s->set_loss(v1::MSE); },
                "job.loss: model.llama trains with CROSS_ENTROPY, got MSE"},
        BadCase{"no token data", [](v1::JobSpec* s) { s->mutable_data()->mutable_synthetic(); },
                "job.data: model.llama trains on token files"},
        BadCase{"token file shorter than a sequence",
                [](v1::JobSpec* s) {
                  s->mutable_data()->mutable_tokens()->set_val_path(TokenFile("short.bin", 16));
                },
                "a sequence of model.llama.block_size 16 needs at least 17"}),
    [](const auto& info) {
      std::string name = info.param.what;
      for (char& c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace shardwise
