// Step time of FULL_SHARD with prefetch against without, in the same run: world 2, one
// process and one BLAS thread per rank, and an injected link latency (a sleep before
// every collective on the communication thread) of about one unit's compute, so that
// communication and compute are of similar size, as on a real network. Prints one line
// per setting: "SETTING seconds_per_step".

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "bench/multiprocess.h"
#include "bench/rank_training.h"
#include "worker/compute/cpu/blas_kernels.h"
#include "worker/train/trainer.h"
#include "worker/train/training_hooks.h"

namespace shardwise::bench {
namespace {

// The injected link latency: a sleep before every collective on the communication threads.
class LinkLatency final : public TrainingHooks {
 public:
  explicit LinkLatency(int64_t microseconds) : microseconds_(microseconds) {}
  std::function<void()> CommunicationDelay() override {
    return [us = microseconds_] { std::this_thread::sleep_for(std::chrono::microseconds(us)); };
  }

 private:
  const int64_t microseconds_;
};

v1::JobSpec PrefetchSpec(v1::BackwardPrefetch::Value backward, bool forward, int steps) {
  v1::JobSpec spec;
  for (int w : {512, 1024, 1024, 1024, 1024, 512}) spec.mutable_model()->add_layer_widths(w);
  spec.set_loss(v1::MSE);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_fsdp()->set_backward_prefetch(backward);
  spec.mutable_fsdp()->set_forward_prefetch(forward);
  spec.mutable_optimizer()->mutable_sgd()->set_lr(0.01);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(256);
  spec.set_global_batch_size(64);
  spec.set_steps(steps);
  spec.set_world_size(2);
  return spec;
}

}  // namespace
}  // namespace shardwise::bench

int main(int argc, char** argv) {
  using namespace shardwise;
  cpu::RestartOnBetterBlasKernels(argv);
  const int warmup = argc > 1 ? std::atoi(argv[1]) : 3;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 20;
  const int latency_us = argc > 3 ? std::atoi(argv[3]) : 3000;
  struct Setting {
    const char* name;
    v1::BackwardPrefetch::Value backward;
    bool forward;
  };
  for (const Setting& s :
       {Setting{"NONE", v1::BackwardPrefetch::NONE, false},
        Setting{"BACKWARD_PRE", v1::BackwardPrefetch::BACKWARD_PRE, false},
        Setting{"BACKWARD_POST", v1::BackwardPrefetch::BACKWARD_POST, false},
        Setting{"BACKWARD_PRE+forward", v1::BackwardPrefetch::BACKWARD_PRE, true}}) {
    const v1::JobSpec spec = bench::PrefetchSpec(s.backward, s.forward, warmup + steps);
    const bool ok = bench::RunRanks(2, [&](int rank, gloo::rendezvous::Store& store) {
      double timed = 0;
      bench::LinkLatency link(latency_us);
      auto result = bench::TrainRank(
          spec, rank, store,
          [&](const v1::Progress& p) {
            if (p.step() > warmup) timed += p.step_seconds();
          },
          &link);
      if (!result.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, result.status().ToString().c_str());
        return 1;
      }
      if (rank == 0) {
        std::printf("%s %.5f\n", s.name, timed / steps);
        std::fflush(stdout);
      }
      return 0;
    });
    if (!ok) return 1;
  }
  return 0;
}
