// Steps per second of the FSDP runtime on CPU, one process per rank, one BLAS thread each:
// the model of the benchmark ([1024, 4096, 4096, 1024], ReLU, MSE, SGD momentum
// 0.9, global batch 64, world 2), for every sharding strategy, then FULL_SHARD and
// NO_SHARD with mixed precision and communication hooks. Prints one line per run:
// "NAME steps_per_second all_gather_bytes reduce_scatter_bytes all_reduce_bytes", the
// bytes per timed step as the runtime's counters report them (rank 0). bench/run.sh
// compares the strategies with PyTorch DDP and the precisions with FP32.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "bench/multiprocess.h"
#include "bench/rank_training.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/train/trainer.h"

namespace shardwise::bench {
namespace {

v1::JobSpec BenchSpec(v1::ShardingStrategy::Value strategy, int world, int steps) {
  v1::JobSpec spec;
  for (int w : {1024, 4096, 4096, 1024}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_model()->set_activation(v1::RELU);
  spec.set_loss(v1::MSE);
  spec.mutable_fsdp()->set_sharding_strategy(strategy);
  if (strategy == v1::ShardingStrategy::HYBRID_SHARD ||
      strategy == v1::ShardingStrategy::HYBRID_SHARD_ZERO2) {
    spec.mutable_fsdp()->set_shard_group_size(world / 2 > 0 ? world / 2 : 1);
  }
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.01);
  spec.mutable_optimizer()->mutable_sgd()->set_momentum(0.9);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(512);
  spec.set_global_batch_size(64);
  spec.set_steps(steps);
  spec.set_world_size(world);
  return spec;
}

}  // namespace
}  // namespace shardwise::bench

namespace shardwise::bench {
namespace {

// Trains `spec` on `world` processes; prints rank 0's line. False if a rank failed.
bool RunAndReport(const std::string& name, const v1::JobSpec& spec, int world, int warmup,
                  int steps) {
  return RunRanks(world, [&](int rank, gloo::rendezvous::Store& store) {
    double timed = 0;
    v1::Progress at_warmup, last;
    auto result = TrainRank(spec, rank, store, [&](const v1::Progress& p) {
      if (p.step() > warmup) timed += p.step_seconds();
      if (p.step() == warmup) at_warmup = p;
      last = p;
    });
    if (!result.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", rank, result.status().ToString().c_str());
      return 1;
    }
    if (rank == 0) {
      std::printf(
          "%s %.3f %lld %lld %lld\n", name.c_str(), steps / timed,
          static_cast<long long>((last.all_gather_bytes() - at_warmup.all_gather_bytes()) / steps),
          static_cast<long long>((last.reduce_scatter_bytes() - at_warmup.reduce_scatter_bytes()) /
                                 steps),
          static_cast<long long>((last.all_reduce_bytes() - at_warmup.all_reduce_bytes()) / steps));
      std::fflush(stdout);
    }
    return 0;
  });
}

}  // namespace
}  // namespace shardwise::bench

int main(int argc, char** argv) {
  using namespace shardwise;
  cpu::RestartOnBetterBlasKernels(argv);
  const int world = 2;
  const int warmup = argc > 1 ? std::atoi(argv[1]) : 3;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  for (auto strategy : {v1::ShardingStrategy::FULL_SHARD, v1::ShardingStrategy::SHARD_GRAD_OP,
                        v1::ShardingStrategy::NO_SHARD, v1::ShardingStrategy::HYBRID_SHARD,
                        v1::ShardingStrategy::HYBRID_SHARD_ZERO2}) {
    const v1::JobSpec spec = bench::BenchSpec(strategy, world, warmup + steps);
    if (!bench::RunAndReport(v1::ShardingStrategy::Value_Name(strategy), spec, world, warmup,
                             steps)) {
      return 1;
    }
  }
  // Precision: the same jobs with BF16 parameters, or with a compressing hook.
  struct Variant {
    const char* name;
    v1::ShardingStrategy::Value strategy;
    v1::Dtype param_dtype;
    v1::CommHook::Hook hook;
  };
  for (const Variant& v : {
           Variant{"FULL_SHARD+bf16_params", v1::ShardingStrategy::FULL_SHARD, v1::BF16,
                   v1::CommHook::NO_HOOK},
           Variant{"FULL_SHARD+bf16_compress", v1::ShardingStrategy::FULL_SHARD, v1::FP32,
                   v1::CommHook::BF16_COMPRESS},
           Variant{"NO_SHARD+fp16_compress", v1::ShardingStrategy::NO_SHARD, v1::FP32,
                   v1::CommHook::FP16_COMPRESS},
       }) {
    v1::JobSpec spec = bench::BenchSpec(v.strategy, world, warmup + steps);
    if (v.param_dtype != v1::FP32) {
      spec.mutable_fsdp()->mutable_mixed_precision()->set_param_dtype(v.param_dtype);
    }
    spec.mutable_comm_hook()->set_hook(v.hook);
    if (!bench::RunAndReport(v.name, spec, world, warmup, steps)) return 1;
  }
  return 0;
}
