// A small GPT (4 layers, 256 wide, 128 context, byte vocabulary, global batch 16
// sequences) on CPU, one process per rank, one BLAS thread each, on the license texts
// Debian ships (bench/gpt.sh runs it; bench/gpt_profile.sh one configuration alone). With
// $SHARDWISE_BENCH_MODEL=llama, a Llama of the same size instead (bench/llama.sh):
// grouped-query attention (4 heads on 2 K/V heads), a SwiGLU MLP of width 688, a tied head.
// Two measurements, printed one per line:
//   throughput NAME TOKENS_PER_SECOND      timed steps after a warm-up
//   memory NAME PARAMETERS GRADIENTS OPTIMIZER ACTIVATIONS   rank 0's peak bytes
//   estimated NAME PARAMETERS GRADIENTS OPTIMIZER ACTIVATIONS
//                                         contracts/memory_estimate.h's prediction
// and, asked for alone, "blas CORE": the OpenBLAS kernels the ranks run (the library's
// pick, or the wider ones worker/compute/cpu/blas_kernels.h restarts onto); and
// "loss NAME STEP LOSS" for every step of the three timed configurations, LOSS in
// hexadecimal, to show that a change to the kernels leaves the training bit for bit as
// it was (with $OPENBLAS_CORETYPE fixed: each OpenBLAS core rounds its own way).
// The memory runs compare FULL_SHARD (with and without prefetch), NO_SHARD, FULL_SHARD
// with activation checkpointing and with FUSED attention, and both attentions at a
// context of 1024.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_model.h"
#include "bench/multiprocess.h"
#include "bench/rank_training.h"
#include "contracts/job_spec_defaults.h"
#include "contracts/memory_estimate.h"
#include "contracts/transformer_config.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/train/trainer.h"

namespace shardwise::bench {
namespace {

// The ranks: $SHARDWISE_BENCH_WORLD, 2 by default (bench/gpt.sh also measures 1 and 4).
int World() {
  const char* world = std::getenv("SHARDWISE_BENCH_WORLD");
  return world != nullptr && std::atoi(world) > 0 ? std::atoi(world) : 2;
}

// The concatenated license texts as byte tokens, once per run.
std::string TokenFile() {
  static const std::string path =
      WriteLicenseTokens(absl::StrCat("/tmp/shardwise-gpt-bench-", getpid(), ".bin"));
  return path;
}

bool Llama() {
  const char* model = std::getenv("SHARDWISE_BENCH_MODEL");
  return model != nullptr && std::string(model) == "llama";
}

// The model: the GPT, or the Llama of the same width, depth and context.
v1::ModelSpec Model() {
  v1::ModelSpec model;
  if (Llama()) {
    v1::LlamaConfig* llama = model.mutable_llama();
    llama->set_vocab_size(256);
    llama->set_hidden_size(256);
    llama->set_intermediate_size(688);
    llama->set_num_hidden_layers(4);
    llama->set_num_attention_heads(4);
    llama->set_num_key_value_heads(2);
    llama->set_max_position_embeddings(1024);
    llama->set_block_size(128);
    llama->set_tie_word_embeddings(true);
    return model;
  }
  *model.mutable_gpt() = BenchGpt();
  return model;
}

void SetBlockSize(v1::JobSpec& spec, int64_t block_size) {
  if (Llama()) return spec.mutable_model()->mutable_llama()->set_block_size(block_size);
  spec.mutable_model()->mutable_gpt()->set_block_size(block_size);
}

void SetAttention(v1::JobSpec& spec, v1::GptConfig::Attention attention) {
  if (Llama()) return spec.mutable_model()->mutable_llama()->set_attention(attention);
  spec.mutable_model()->mutable_gpt()->set_attention(attention);
}

v1::JobSpec Spec(v1::ShardingStrategy::Value strategy, int steps) {
  v1::JobSpec spec;
  *spec.mutable_model() = Model();
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_tokens()->set_train_path(TokenFile());
  spec.set_global_batch_size(16);
  spec.set_steps(steps);
  spec.set_world_size(World());
  return spec;
}

// What rank 0 prints of a run.
enum class Report { kThroughput, kMemory, kLosses };

// Trains `spec`; rank 0 prints its lines. False if a rank failed.
bool Run(const std::string& name, const v1::JobSpec& spec, int warmup, Report report) {
  return RunRanks(World(), [&](int rank, gloo::rendezvous::Store& store) {
    double timed = 0;
    int64_t timed_steps = 0;
    std::vector<std::pair<int64_t, double>> losses;
    auto result = TrainRank(spec, rank, store, [&](const v1::Progress& p) {
      if (p.step() > warmup) timed += p.step_seconds(), ++timed_steps;
      losses.emplace_back(p.step(), p.loss());
    });
    if (!result.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, result.status().ToString().c_str());
      return 1;
    }
    if (rank != 0) return 0;
    if (report == Report::kLosses) {
      // Exact (hexadecimal floating point): two builds agree bit for bit or not at all.
      for (const auto& [step, loss] : losses) {
        std::printf("loss %s %lld %a\n", name.c_str(), static_cast<long long>(step), loss);
      }
    } else if (report == Report::kMemory) {
      const MemoryStats& m = result->memory;
      std::printf("memory %s %lld %lld %lld %lld\n", name.c_str(),
                  static_cast<long long>(m.peak(MemoryCategory::kParameters)),
                  static_cast<long long>(m.peak(MemoryCategory::kGradients)),
                  static_cast<long long>(m.peak(MemoryCategory::kOptimizerState)),
                  static_cast<long long>(m.peak(MemoryCategory::kActivations)));
    } else {
      const double tokens =
          static_cast<double>(timed_steps) * spec.global_batch_size() * BlockSize(spec.model());
      std::printf("throughput %s %.1f\n", name.c_str(), tokens / timed);
    }
    std::fflush(stdout);
    return 0;
  });
}

// What contracts/memory_estimate.h predicts for one rank: what the coordinator and the
// workers check before a job runs.
bool PrintEstimate(const std::string& name, v1::JobSpec spec) {
  ApplyJobSpecDefaults(&spec);
  auto estimate = EstimateRankMemory(spec);
  if (!estimate.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), estimate.status().ToString().c_str());
    return false;
  }
  std::printf("estimated %s %lld %lld %lld %lld\n", name.c_str(),
              static_cast<long long>(estimate->parameters),
              static_cast<long long>(estimate->gradients),
              static_cast<long long>(estimate->optimizer_state),
              static_cast<long long>(estimate->activations));
  std::fflush(stdout);  // before the ranks fork, or they print it again
  return true;
}

// The three timed configurations, or the one named ("FULL_SHARD", "NO_SHARD", "FUSED").
bool RunThroughput(int warmup, int steps, const std::string& only,
                   Report report = Report::kThroughput) {
  struct Timed {
    const char* name;        // as printed
    const char* short_name;  // as `only` names it
    v1::JobSpec spec;
  };
  v1::JobSpec fused = Spec(v1::ShardingStrategy::FULL_SHARD, warmup + steps);
  SetAttention(fused, v1::GptConfig::FUSED);
  const Timed timed[] = {
      {"FULL_SHARD", "FULL_SHARD", Spec(v1::ShardingStrategy::FULL_SHARD, warmup + steps)},
      {"NO_SHARD", "NO_SHARD", Spec(v1::ShardingStrategy::NO_SHARD, warmup + steps)},
      {"FULL_SHARD+fused_attention", "FUSED", fused}};
  for (const Timed& t : timed) {
    if (!only.empty() && only != t.short_name) continue;
    if (!Run(t.name, t.spec, warmup, report)) return false;
  }
  return true;
}

// Both attentions at a context of 1024 (two sequences per rank), `steps` timed.
bool RunLongContext(int warmup, int steps) {
  for (const auto attention : {v1::GptConfig::MATERIALIZED, v1::GptConfig::FUSED}) {
    v1::JobSpec spec = Spec(v1::ShardingStrategy::FULL_SHARD, warmup + steps);
    SetBlockSize(spec, 1024);
    SetAttention(spec, attention);
    spec.set_global_batch_size(int64_t{2} * World());
    const std::string name =
        attention == v1::GptConfig::FUSED ? "FUSED,T=1024" : "MATERIALIZED,T=1024";
    if (!Run(name, spec, warmup, Report::kThroughput)) return false;
  }
  return true;
}

// Peak memory per rank against the estimate, two steps each.
bool RunMemory() {
  v1::JobSpec full = Spec(v1::ShardingStrategy::FULL_SHARD, 2);
  full.mutable_fsdp()->set_backward_prefetch(v1::BackwardPrefetch::NONE);
  v1::JobSpec prefetch = Spec(v1::ShardingStrategy::FULL_SHARD, 2);
  v1::JobSpec none = Spec(v1::ShardingStrategy::NO_SHARD, 2);
  v1::JobSpec checkpointed = full;
  checkpointed.set_activation_checkpointing(true);
  v1::JobSpec fused = full;
  SetAttention(fused, v1::GptConfig::FUSED);
  // A context of 1024 (two sequences per rank, one step): where the probabilities,
  // quadratic in the context, outweigh the rest of the activations.
  v1::JobSpec long_context = full;
  SetBlockSize(long_context, 1024);
  long_context.set_global_batch_size(int64_t{2} * World());
  long_context.set_steps(1);
  v1::JobSpec long_fused = long_context;
  SetAttention(long_fused, v1::GptConfig::FUSED);
  for (const auto& [name, spec] :
       {std::make_pair("FULL_SHARD", full), std::make_pair("FULL_SHARD+prefetch", prefetch),
        std::make_pair("NO_SHARD", none), std::make_pair("FULL_SHARD+checkpointing", checkpointed),
        std::make_pair("FULL_SHARD+fused_attention", fused),
        std::make_pair("FULL_SHARD,T=1024", long_context),
        std::make_pair("FULL_SHARD+fused_attention,T=1024", long_fused)}) {
    if (!PrintEstimate(name, spec) || !Run(name, spec, 0, Report::kMemory)) return false;
  }
  return true;
}

// The fault-tolerant job's commit vote (one 1-float all-reduce before each optimizer
// step): NO_SHARD with and without fault_tolerance, taking turns `runs` times.
bool RunCommitVote(int warmup, int steps, int runs) {
  const v1::JobSpec plain = Spec(v1::ShardingStrategy::NO_SHARD, warmup + steps);
  v1::JobSpec tolerant = plain;
  tolerant.mutable_fault_tolerance()->set_min_replicas(1);
  for (int run = 0; run < runs; ++run) {
    if (!Run("NO_SHARD", plain, warmup, Report::kThroughput) ||
        !Run("NO_SHARD+fault_tolerance", tolerant, warmup, Report::kThroughput)) {
      return false;
    }
  }
  return true;
}

}  // namespace
}  // namespace shardwise::bench

// usage: gpt_bench [WARMUP_STEPS] [TIMED_STEPS]
//                  [all|throughput|long|memory|vote|losses|blas|FULL_SHARD|NO_SHARD|FUSED]
// ($SHARDWISE_BENCH_WORLD ranks, 2 by default)
int main(int argc, char** argv) {
  using namespace shardwise;
  cpu::RestartOnBetterBlasKernels(argv);
  const int warmup = argc > 1 ? std::atoi(argv[1]) : 2;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const std::string what = argc > 3 ? argv[3] : "all";
  bool ok;
  if (what == "all") {
    ok = bench::RunThroughput(warmup, steps, "") && bench::RunMemory();
  } else if (what == "throughput") {
    ok = bench::RunThroughput(warmup, steps, "");
  } else if (what == "memory") {
    ok = bench::RunMemory();
  } else if (what == "long") {
    ok = bench::RunLongContext(warmup, steps);
  } else if (what == "losses") {
    ok = bench::RunThroughput(0, steps, "", bench::Report::kLosses);
  } else if (what == "blas") {
    // The OpenBLAS kernels the ranks run (bench/blas_cores.sh gives PyTorch the same).
    std::printf("blas %s\n", cpu::BlasCoreName().c_str());
    ok = true;
  } else if (what == "vote") {
    ok = bench::RunCommitVote(warmup, steps, /*runs=*/3);
  } else if (what == "FULL_SHARD" || what == "NO_SHARD" || what == "FUSED") {
    ok = bench::RunThroughput(warmup, steps, what);
  } else {
    std::fprintf(stderr,
                 "unknown '%s': all, throughput, long, memory, vote, losses, blas, FULL_SHARD, "
                 "NO_SHARD or FUSED\n",
                 what.c_str());
    return 2;
  }
  std::remove(bench::TokenFile().c_str());
  return ok ? 0 : 1;
}
