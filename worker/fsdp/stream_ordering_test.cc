// The FSDP runtime's stream ordering, checked without a GPU: each job runs once on the CPU
// device, where every operation completes before it returns, and again, for several seeds,
// on the stream-ordering checker (testing::AsyncCpuRankDevices: the CPU's arithmetic run
// later on emulated compute, unshard, post-backward and all-reduce streams with random
// pauses, per-stream memory pools poisoned on reuse, collectives in NCCL's and the
// host-staged path's modes). The runtime is the one a CUDA job runs, so a consumer that
// does not wait for its producer, or a buffer reused while another stream still uses it,
// changes the result: every run must equal the CPU's bit for bit, losses and model. Each
// rank's collectives also wait a random while before they launch, and in NCCL's mode
// every rank must launch the same sequence across its communicators (launch_order.h).
// STREAM_ORDERING_SEEDS sets how many seeds each job runs with (10 by default).

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/testing/scratch.h"
#include "contracts/safetensors.h"
#include "gtest/gtest.h"
#include "worker/testing/async_cpu_rank_device.h"
#include "worker/testing/model_compare.h"
#include "worker/testing/threaded_training.h"
#include "worker/testing/token_corpus.h"

namespace shardwise::fsdp {
namespace {

using Strategy = v1::ShardingStrategy::Value;
using Collectives = v1::CudaOptions::Collectives;

struct Job {
  std::string name;
  enum class Model { kGpt, kLlama, kMlp } model = Model::kGpt;
  Strategy strategy = v1::ShardingStrategy::FULL_SHARD;
  int world = 2;
  Collectives collectives = v1::CudaOptions::NCCL;
  v1::BackwardPrefetch::Value prefetch = v1::BackwardPrefetch::BACKWARD_PRE;
  bool forward_prefetch = false;
  bool limit_all_gathers = true;
  int accumulation = 1;
  bool checkpointing = false;
  bool fused_attention = false;
  v1::Dtype dtype = v1::FP32;  // param_dtype
  v1::CommHook::Hook hook = v1::CommHook::NO_HOOK;
  v1::Loss loss = v1::CROSS_ENTROPY;  // the MLP's
  // The reduction stream's every task waits this long first (StreamTiming::reduction_lag).
  absl::Duration reduction_lag = absl::ZeroDuration();
  int gpt_layers = 2;
};

std::ostream& operator<<(std::ostream& os, const Job& job) { return os << job.name; }

std::string TempDir(const std::string& name) {
  std::string dir = testing::ScratchPath(name);
  std::filesystem::create_directories(dir);
  return dir;
}

int Seeds() {
  const char* seeds = std::getenv("STREAM_ORDERING_SEEDS");
  return seeds != nullptr ? std::max(1, std::atoi(seeds)) : 10;
}

// A Llama as small as the GPT, grouped-query (two query heads per K/V head).
v1::LlamaConfig SmallLlama(bool fused_attention) {
  v1::LlamaConfig llama;
  llama.set_vocab_size(32);
  llama.set_hidden_size(16);
  llama.set_intermediate_size(24);
  llama.set_num_hidden_layers(2);
  llama.set_num_attention_heads(4);
  llama.set_num_key_value_heads(2);
  llama.set_block_size(16);
  llama.set_max_position_embeddings(16);
  if (fused_attention) llama.set_attention(v1::GptConfig::FUSED);
  return llama;
}

void SetModel(const Job& job, const std::string& dir, v1::JobSpec* spec) {
  if (job.model != Job::Model::kMlp) {
    if (job.model == Job::Model::kGpt) {
      *spec->mutable_model()->mutable_gpt() = testing::CorpusGpt(16, 16);
      spec->mutable_model()->mutable_gpt()->set_n_layer(job.gpt_layers);
      if (job.fused_attention)
        spec->mutable_model()->mutable_gpt()->set_attention(v1::GptConfig::FUSED);
    } else {
      *spec->mutable_model()->mutable_llama() = SmallLlama(job.fused_attention);
    }
    spec->mutable_optimizer()->mutable_adamw()->set_lr(3e-3);
    v1::TokenData* tokens = spec->mutable_data()->mutable_tokens();
    tokens->set_train_path(testing::WriteLearnableTokens(dir + "/train.bin", 4000, 1));
    tokens->set_seed(7);
    return;
  }
  for (int width : {24, 64, 48, 10}) spec->mutable_model()->add_layer_widths(width);
  spec->mutable_model()->set_activation(v1::GELU);
  spec->mutable_wrap()->set_layers_per_unit(1);
  spec->mutable_optimizer()->mutable_sgd()->set_lr(0.1);
  spec->mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  spec->mutable_data()->mutable_synthetic()->set_seed(11);
  spec->mutable_data()->mutable_synthetic()->set_num_samples(256);
  spec->set_loss(job.loss);
}

v1::JobSpec SpecFor(const Job& job, const std::string& dir) {
  v1::JobSpec spec;
  SetModel(job, dir, &spec);
  v1::FsdpConfig* fsdp = spec.mutable_fsdp();
  fsdp->set_sharding_strategy(job.strategy);
  if (job.strategy == v1::ShardingStrategy::HYBRID_SHARD ||
      job.strategy == v1::ShardingStrategy::HYBRID_SHARD_ZERO2) {
    fsdp->set_shard_group_size(2);
  }
  fsdp->set_backward_prefetch(job.prefetch);
  fsdp->set_forward_prefetch(job.forward_prefetch);
  fsdp->set_limit_all_gathers(job.limit_all_gathers);
  if (job.dtype != v1::FP32) fsdp->mutable_mixed_precision()->set_param_dtype(job.dtype);
  spec.mutable_comm_hook()->set_hook(job.hook);
  spec.mutable_optimizer()->set_max_grad_norm(1.0);
  spec.set_activation_checkpointing(job.checkpointing);
  spec.set_gradient_accumulation_steps(job.accumulation);
  spec.set_global_batch_size(int64_t{8} * job.accumulation);
  spec.set_steps(6);
  spec.mutable_init()->set_seed(3);
  spec.set_world_size(job.world);
  spec.mutable_cuda()->set_collectives(job.collectives);
  return spec;
}

struct Run {
  std::vector<double> losses;
  TensorMap model;
  std::map<int, std::vector<std::string>> launches;  // each rank's collectives, in order
};

// Each rank's collectives wait a random while before they launch (a different sequence
// per rank and seed), so the ranks' two communication threads race differently: their
// launches must still come in one order (the training thread's), the same on every rank.
std::function<TrainingFaults(int rank)> ShakenLaunches(uint64_t seed) {
  return [seed](int rank) {
    TrainingFaults faults;
    struct Random {
      absl::Mutex mu;
      std::mt19937 rng;
    };
    auto random = std::make_shared<Random>();
    random->rng.seed(static_cast<uint32_t>(seed * 1000 + rank));
    faults.communication_delay = [random] {
      int64_t micros;
      {
        absl::MutexLock lock(&random->mu);
        micros = static_cast<int64_t>(random->rng() % 200);
      }
      absl::SleepFor(absl::Microseconds(micros));
    };
    return faults;
  };
}

// `low_precision_storage`: the streamed devices keep a 16-bit job's activations and
// unsharded parameters in its param_dtype (Device::StorageType), and must still equal the
// CPU's FP32 storage bit for bit.
absl::StatusOr<Run> Train(v1::JobSpec spec, v1::DeviceKind device, uint64_t seed,
                          const std::string& path, bool low_precision_storage = false,
                          absl::Duration reduction_lag = absl::ZeroDuration()) {
  spec.set_device(device);
  spec.mutable_output()->set_final_model_path(path);
  testing::ThreadedOptions options;
  auto launches = std::make_shared<testing::LaunchLogs>();
  if (device == v1::CUDA) {
    testing::StreamTiming timing;
    timing.seed = seed;
    timing.reduction_lag = reduction_lag;
    options.make_device = testing::AsyncCpuRankDevices(timing, low_precision_storage, launches);
    options.faults = ShakenLaunches(seed);
  }
  auto run = testing::TrainInThreads(spec, options);
  if (!run.ok()) return run.status();
  auto model = ReadSafetensors(path);
  if (!model.ok()) return model.status();
  return Run{run->rank0_losses, std::move(*model), launches->ByRank()};
}

// NCCL's collectives wait for their peers on the device: every rank launches the same
// sequence across its communicators (comm/launch_order.h), or two ranks could each wait
// for the other's.
void ExpectOneLaunchOrder(const std::map<int, std::vector<std::string>>& launches) {
  ASSERT_FALSE(launches.empty());
  const std::vector<std::string>& first = launches.begin()->second;
  ASSERT_FALSE(first.empty());
  for (const auto& [rank, sequence] : launches) {
    ASSERT_EQ(sequence.size(), first.size()) << "rank " << rank;
    for (size_t i = 0; i < first.size(); ++i) {
      ASSERT_EQ(sequence[i], first[i]) << "rank " << rank << "'s launch " << i;
    }
  }
}

class StreamOrderingTest : public ::testing::TestWithParam<Job> {};

TEST_P(StreamOrderingTest, EveryInterleavingEqualsTheSynchronousRunBitForBit) {
  const Job& job = GetParam();
  const std::string dir = TempDir("stream-ordering-" + job.name);
  const v1::JobSpec spec = SpecFor(job, dir);
  auto synchronous = Train(spec, v1::CPU, 0, dir + "/cpu.safetensors");
  ASSERT_TRUE(synchronous.ok()) << synchronous.status();
  ASSERT_FALSE(synchronous->losses.empty());
  for (int seed = 1; seed <= Seeds(); ++seed) {
    // A 16-bit job alternates its storage: FP32 buffers on even seeds, its param_dtype on
    // odd ones.
    const bool low_precision_storage = job.dtype != v1::FP32 && seed % 2 == 1;
    SCOPED_TRACE(absl::StrCat("seed ", seed, low_precision_storage ? ", 16-bit storage" : ""));
    auto streamed =
        Train(spec, v1::CUDA, seed, absl::StrCat(dir, "/streams-", seed, ".safetensors"),
              low_precision_storage, job.reduction_lag);
    ASSERT_TRUE(streamed.ok()) << streamed.status();
    EXPECT_EQ(streamed->losses, synchronous->losses);
    EXPECT_TRUE(testing::ModelsClose(streamed->model, synchronous->model, 0, 0));
    if (job.collectives == v1::CudaOptions::NCCL && job.world > 1) {
      ExpectOneLaunchOrder(streamed->launches);
    }
  }
}

Job Gpt(std::string name) {
  Job job;
  job.name = std::move(name);
  return job;
}

Job Mlp(std::string name) {
  Job job = Gpt(std::move(name));
  job.model = Job::Model::kMlp;
  return job;
}

// The GPT's and the Llama's jobs, then the MLP's.
void AddTransformerJobs(std::vector<Job>& jobs) {
  jobs.push_back(Gpt("gpt_full_shard"));
  Job staged = Gpt("gpt_full_shard_host_staged");
  staged.collectives = v1::CudaOptions::HOST_STAGED_GLOO;
  jobs.push_back(staged);
  Job post = Gpt("gpt_backward_post_forward_prefetch");
  post.prefetch = v1::BackwardPrefetch::BACKWARD_POST;
  post.forward_prefetch = true;
  jobs.push_back(post);
  Job unlimited = Gpt("gpt_no_prefetch_no_rate_limit_world1");
  unlimited.prefetch = v1::BackwardPrefetch::NONE;
  unlimited.limit_all_gathers = false;
  unlimited.world = 1;
  jobs.push_back(unlimited);
  // One rank reduces on the training thread's stream (GradientReducer): its rounding to
  // BF16 and accumulation across micro-steps in that stream's order.
  Job alone = Gpt("gpt_world1_bf16_accumulation");
  alone.world = 1;
  alone.dtype = v1::BF16;
  alone.accumulation = 2;
  jobs.push_back(alone);
  Job zero2 = Gpt("gpt_shard_grad_op_accumulation");
  zero2.strategy = v1::ShardingStrategy::SHARD_GRAD_OP;
  zero2.accumulation = 2;
  jobs.push_back(zero2);
  // Reductions far behind compute: the compute stream reuses a unit's unsharded gradient
  // (and reads the gradient shards) only once ordered after its reduction on the device.
  // Four blocks: the third's gradient takes the first's freed block within one backward.
  Job lagging = Gpt("gpt_full_shard_lagging_reductions");
  lagging.reduction_lag = absl::Milliseconds(1);
  lagging.gpt_layers = 4;
  jobs.push_back(lagging);
  Job hybrid = Gpt("gpt_hybrid_shard_world4");
  hybrid.strategy = v1::ShardingStrategy::HYBRID_SHARD;
  hybrid.world = 4;
  jobs.push_back(hybrid);
  Job checkpointed = Gpt("gpt_checkpointing_fused_attention");
  checkpointed.checkpointing = true;
  checkpointed.fused_attention = true;
  jobs.push_back(checkpointed);
  Job bf16 = Gpt("gpt_bf16_accumulation");
  bf16.dtype = v1::BF16;
  bf16.accumulation = 2;
  jobs.push_back(bf16);
  // The Llama's grouped-query attention reads q, k and v apart (no repeat_kv copy): their
  // buffers' hand-over to the fused attention's and back.
  Job llama = Gpt("llama_gqa_fused_attention_bf16");
  llama.model = Job::Model::kLlama;
  llama.fused_attention = true;
  llama.dtype = v1::BF16;
  jobs.push_back(llama);
  // Unsharded 16-bit parameters made by a local rounding (into 16-bit storage on odd
  // seeds), and checkpointed stages' copies of 16-bit activations.
  Job fp16 = Gpt("gpt_no_shard_checkpointing_fp16");
  fp16.strategy = v1::ShardingStrategy::NO_SHARD;
  fp16.checkpointing = true;
  fp16.dtype = v1::FP16;
  jobs.push_back(fp16);
  // The materialised attention's grouped K/V packing and unpacking in 16-bit storage.
  Job packed = Gpt("llama_gqa_materialized_bf16_checkpointing");
  packed.model = Job::Model::kLlama;
  packed.checkpointing = true;
  packed.dtype = v1::BF16;
  jobs.push_back(packed);
}

void AddMlpJobs(std::vector<Job>& jobs) {
  jobs.push_back(Mlp("mlp_full_shard"));
  Job ddp = Mlp("mlp_no_shard_bf16_compress_hook");
  ddp.strategy = v1::ShardingStrategy::NO_SHARD;
  ddp.hook = v1::CommHook::BF16_COMPRESS;
  jobs.push_back(ddp);
  Job mixed_hook = Mlp("mlp_no_shard_mixed_precision_hook_accumulation");
  mixed_hook.strategy = v1::ShardingStrategy::NO_SHARD;
  mixed_hook.hook = v1::CommHook::MIXED_PRECISION;
  mixed_hook.accumulation = 2;
  jobs.push_back(mixed_hook);
  Job mlp_hybrid = Mlp("mlp_hybrid_shard_world4_bf16");
  mlp_hybrid.strategy = v1::ShardingStrategy::HYBRID_SHARD;
  mlp_hybrid.world = 4;
  mlp_hybrid.dtype = v1::BF16;
  jobs.push_back(mlp_hybrid);
  Job zero2_hybrid = Mlp("mlp_hybrid_zero2_world4_accumulation_mse");
  zero2_hybrid.strategy = v1::ShardingStrategy::HYBRID_SHARD_ZERO2;
  zero2_hybrid.world = 4;
  zero2_hybrid.accumulation = 2;
  zero2_hybrid.loss = v1::MSE;
  jobs.push_back(zero2_hybrid);
}

std::vector<Job> Jobs() {
  std::vector<Job> jobs;
  AddTransformerJobs(jobs);
  AddMlpJobs(jobs);
  return jobs;
}

INSTANTIATE_TEST_SUITE_P(Jobs, StreamOrderingTest, ::testing::ValuesIn(Jobs()),
                         [](const ::testing::TestParamInfo<Job>& info) { return info.param.name; });

}  // namespace
}  // namespace shardwise::fsdp
