#include "worker/train/epoch_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "contracts/membership.h"
#include "gloo/common/error.h"

namespace shardwise {
namespace {

// How often a wait looks for a newer epoch.
constexpr std::chrono::milliseconds kSlice(200);

}  // namespace

EpochStore::EpochStore(int32_t epoch, gloo::rendezvous::Store& attempt_store,
                       std::function<bool()> superseded, std::chrono::milliseconds timeout)
    : epoch_(epoch),
      prefixed_(MembershipEpochKeyPrefix(epoch), attempt_store),
      superseded_(std::move(superseded)),
      timeout_(timeout) {}

void EpochStore::set(const std::string& key, const std::vector<char>& data) {
  prefixed_.set(key, data);
}

std::vector<char> EpochStore::get(const std::string& key) {
  wait({key});
  return prefixed_.get(key);
}

std::vector<std::vector<char>> EpochStore::multiGet(const std::vector<StoreRead>& reads) {
  return prefixed_.multiGet(reads);
}

void EpochStore::wait(const std::vector<std::string>& keys,
                      const std::chrono::milliseconds& timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    if (superseded_()) {
      throw gloo::IoException(
          absl::StrCat("rendezvous of membership epoch ", epoch_, ": a newer epoch came"));
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= std::chrono::milliseconds(0)) {
      throw gloo::IoException(absl::StrCat("rendezvous of membership epoch ", epoch_,
                                           ": peers did not arrive within ", timeout.count(),
                                           " ms"));
    }
    const std::chrono::milliseconds slice = std::min(left, kSlice);
    const Clock::time_point start = Clock::now();
    try {
      prefixed_.wait(keys, slice);
      return;
    } catch (const gloo::IoException&) {
      // A slice that ran out is not an error; a failure well before its time is. (Not
      // "before its time": the inner store's own rounding ends a slice up to a
      // millisecond early, which must not end the whole wait.)
      if (Clock::now() - start < slice / 2) throw;
    }
  }
}

}  // namespace shardwise
