#include "worker/train/rank_state.h"

#include <xxhash.h>

#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace shardwise {

int64_t RankState::FloatBytes() const {
  int64_t floats = 0;
  for (const std::vector<float>& shard : shards) floats += static_cast<int64_t>(shard.size());
  for (const auto& unit : optimizer) {
    for (const auto& [name, values] : unit) floats += static_cast<int64_t>(values.size());
  }
  return floats * static_cast<int64_t>(sizeof(float));
}

std::string StateDigest(const RankState& state) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> hash(XXH3_createState(), XXH3_freeState);
  XXH3_128bits_reset(hash.get());
  auto add = [&](const void* data, size_t bytes) { XXH3_128bits_update(hash.get(), data, bytes); };
  // Each buffer's length first, so that the same floats split differently differ.
  auto add_floats = [&](const std::vector<float>& values) {
    const uint64_t count = values.size();
    add(&count, sizeof(count));
    add(values.data(), values.size() * sizeof(float));
  };
  for (const std::vector<float>& shard : state.shards) add_floats(shard);
  for (const auto& unit : state.optimizer) {
    for (const auto& [name, values] : unit) {
      add(name.data(), name.size() + 1);  // with its terminator: "a"+"bc" is not "ab"+"c"
      add_floats(values);
    }
  }
  add(&state.optimizer_steps, sizeof(state.optimizer_steps));
  add(&state.steps, sizeof(state.steps));
  const std::string scaler = state.scaler.SerializeAsString();
  add(scaler.data(), scaler.size());
  XXH128_canonical_t canonical;  // big-endian: the same text on every host
  XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(hash.get()));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(canonical.digest), sizeof(canonical)));
}

}  // namespace shardwise
