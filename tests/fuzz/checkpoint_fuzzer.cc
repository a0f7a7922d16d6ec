// The checkpoint reader: a checkpoint folder whose manifest is arbitrary bytes (and whose
// one shard file, for a shard group of one, is the input too), loaded for a small MLP
// job, and the search for the newest checkpoint among such folders.

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "tests/fuzz/fuzz_support.h"
#include "worker/fsdp/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace shardwise;
  const std::string dir = fuzz::ScratchDir() + "/checkpoints";
  const std::string folder = dir + "/step-00000005";
  std::filesystem::create_directories(folder);
  fuzz::WriteScratch("checkpoints/step-00000005/manifest.json", data, size);
  fuzz::WriteScratch("checkpoints/step-00000005/rank-00000.safetensors", data, size);
  v1::JobSpec spec;
  for (int w : {3, 4, 2}) spec.mutable_model()->add_layer_widths(w);
  spec.mutable_optimizer()->mutable_adamw()->set_lr(0.1);  // two states per unit
  // Read whole, and as the second of three ranks (ranges cut across the shard files).
  (void)fsdp::LoadCheckpoint(folder, spec, fsdp::ShardingPlan());
  fsdp::ShardingPlan second_of_three;
  second_of_three.world_size = second_of_three.shard_size = 3;
  second_of_three.rank = second_of_three.shard_rank = 1;
  (void)fsdp::LoadCheckpoint(folder, spec, second_of_three);
  (void)fsdp::FindLatestCheckpoint(dir);
  return 0;
}
