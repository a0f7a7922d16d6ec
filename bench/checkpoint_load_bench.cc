// Host memory of loading a sharded checkpoint, against the checkpoint's bytes read whole
// in the same run. A job of 4 ranks (FULL_SHARD, AdamW, an MLP of 4 Linear units of 2048
// x 2048) writes a checkpoint after one step; then each reader runs in a process of its
// own, its peak resident memory (VmHWM, reset at its start) less its resident memory at
// the start being what it took:
//   - whole: every shard file read whole (what a loader holding the files would hold);
//   - rank R of G: fsdp::LoadCheckpoint for rank R of a shard group of G (G = 1: the
//     whole model and the whole optimizer state);
//   - weights whole / weights rank R of G: the model's initial weights file read into one
//     map, then a parameter at a time into rank R's shards.
// Prints "checkpoint_bytes model_bytes" on the first line, then one line per reader:
// "NAME peak_bytes".

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "bench/multiprocess.h"
#include "bench/rank_training.h"
#include "common/untrusted_file.h"
#include "contracts/checkpoint_files.h"
#include "contracts/model_description.h"
#include "worker/data/weights.h"
#include "worker/fsdp/checkpoint.h"
#include "worker/fsdp/shard_assembler.h"

namespace shardwise::bench {
namespace {

constexpr int kWriters = 4;

v1::JobSpec CheckpointSpec(const std::string& dir) {
  v1::JobSpec spec;
  for (int i = 0; i < 5; ++i) spec.mutable_model()->add_layer_widths(2048);
  spec.set_loss(v1::MSE);
  spec.mutable_fsdp()->set_sharding_strategy(v1::ShardingStrategy::FULL_SHARD);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(1e-3);
  spec.mutable_data()->mutable_synthetic()->set_seed(1);
  spec.mutable_data()->mutable_synthetic()->set_num_samples(32);
  spec.set_global_batch_size(8);
  spec.set_steps(1);
  spec.set_world_size(kWriters);
  spec.mutable_output()->set_checkpoint_dir(dir);
  spec.mutable_output()->set_checkpoint_interval_steps(1);
  return spec;
}

// The step folder's shard files (the manifest names them; every other file is one).
std::vector<std::string> ShardFiles(const std::string& folder) {
  std::vector<std::string> files;
  for (const std::string& name :
       ListFolder(folder, Links::kFollow).value_or(std::vector<std::string>())) {
    if (absl::EndsWith(name, ".safetensors")) files.push_back(absl::StrCat(folder, "/", name));
  }
  return files;
}

// This process's resident memory now and at its peak, in bytes, from one reading of
// /proc/self/status.
struct Resident {
  int64_t now = -1, peak = -1;
};
Resident ReadResident() {
  std::ifstream status("/proc/self/status");
  Resident resident;
  std::string line;
  while (std::getline(status, line)) {
    int64_t* field = line.rfind("VmRSS:", 0) == 0   ? &resident.now
                     : line.rfind("VmHWM:", 0) == 0 ? &resident.peak
                                                    : nullptr;
    if (field == nullptr) continue;
    std::istringstream value(line.substr(6));
    value >> *field;
    *field *= 1024;
  }
  return resident;
}

// Runs `read` in a child process and prints "NAME peak_bytes"; false if it failed.
bool MeasurePeak(const std::string& name, const std::function<bool()>& read) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    // "5" resets the peak to the current resident size (Linux 4.0 and later); a peak well
    // above the resident size after it says the kernel did not.
    std::ofstream("/proc/self/clear_refs") << "5";
    const Resident start = ReadResident();
    if (start.peak < 0 || start.peak > start.now + (int64_t{1} << 20) || !read()) std::_Exit(1);
    std::printf("%s %lld\n", name.c_str(), static_cast<long long>(ReadResident().peak - start.now));
    std::fflush(stdout);
    std::_Exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The same for a job's initial weights (init.safetensors_path, the model's 64 MiB file):
// read whole into one map (as every rank did before it kept only its shards), then a
// parameter at a time into a rank's shards (fsdp::ShardAssembler, as the trainer does).
bool MeasureInitialWeights(v1::JobSpec spec, const std::string& dir) {
  spec.mutable_init()->set_safetensors_path(dir + "/init.safetensors");
  if (!WriteSafetensors(spec.init().safetensors_path(), SeededWeights(spec.model(), 1)).ok()) {
    return false;
  }
  const absl::StatusOr<fsdp::FlatLayout> layout = fsdp::BuildFlatLayout(spec.model(), spec.wrap());
  if (!layout.ok()) return false;
  bool ok = MeasurePeak("weights_whole", [&] { return InitialWeights(spec).ok(); });
  for (const auto& [rank, group] : {std::pair{1, 4}, std::pair{3, 8}}) {
    fsdp::ShardingPlan plan;
    plan.world_size = plan.shard_size = group;
    plan.rank = plan.shard_rank = rank;
    ok &= MeasurePeak(absl::StrCat("weights_rank_", rank, "_of_", group), [&] {
      fsdp::ShardAssembler assembler(*layout, plan);
      return InitialWeights(spec, assembler).ok() && std::move(assembler).Finish().ok();
    });
  }
  return ok;
}

int Run() {
  char pattern[] = "/tmp/shardwise-checkpoint-bench-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const v1::JobSpec spec = CheckpointSpec(dir);
  const bool written = RunRanks(kWriters, [&](int rank, gloo::rendezvous::Store& store) {
    auto run = TrainRank(spec, rank, store, nullptr);
    if (!run.ok()) std::fprintf(stderr, "rank %d: %s\n", rank, run.status().ToString().c_str());
    return run.ok() ? 0 : 1;
  });
  const absl::StatusOr<fsdp::FoundCheckpoint> newest = fsdp::FindLatestCheckpoint(dir);
  if (!written || !newest.ok()) return 1;
  const std::string& folder = newest->folder;
  const std::vector<std::string> shards = ShardFiles(folder);
  int64_t checkpoint_bytes = 0;
  for (const std::string& path : shards) {
    auto file = UntrustedFile::Open(path, kMaxSafetensorsFileBytes, Links::kFollow);
    if (!file.ok()) return 1;
    checkpoint_bytes += static_cast<int64_t>(file->size());
  }
  std::printf("%lld %lld\n", static_cast<long long>(checkpoint_bytes),
              static_cast<long long>(DescribeModel(spec.model())->num_parameters()) * 4);
  bool ok = MeasurePeak("whole", [&] {
    std::vector<std::string> files;
    for (const std::string& path : shards) {
      auto bytes = ReadUntrustedFile(path, kMaxSafetensorsFileBytes, Links::kFollow);
      if (!bytes.ok()) return false;
      files.push_back(*std::move(bytes));
    }
    return true;
  });
  for (const auto& [rank, group] : {std::pair{0, 1}, std::pair{1, 4}, std::pair{3, 8}}) {
    fsdp::ShardingPlan plan;
    plan.world_size = plan.shard_size = group;
    plan.rank = plan.shard_rank = rank;
    ok &= MeasurePeak(absl::StrCat("rank_", rank, "_of_", group),
                      [&] { return fsdp::LoadCheckpoint(folder, spec, plan).ok(); });
  }
  ok &= MeasureInitialWeights(spec, dir);
  std::system(("rm -rf " + dir).c_str());
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace shardwise::bench

int main() { return shardwise::bench::Run(); }
