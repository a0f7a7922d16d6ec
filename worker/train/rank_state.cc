#include "worker/train/rank_state.h"

#include <openssl/evp.h>

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
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                  EVP_MD_CTX_free);
  EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
  auto add = [&](const void* data, size_t bytes) { EVP_DigestUpdate(context.get(), data, bytes); };
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
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(context.get(), digest, &length);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), length));
}

}  // namespace shardwise
