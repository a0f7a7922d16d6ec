#include "worker/comm/group_vote.h"

#include <exception>

#include "absl/strings/str_cat.h"

namespace shardwise {

absl::StatusOr<bool> EveryRankVotesYes(gloo::rendezvous::Store& store, const std::string& name,
                                       const std::vector<int>& ranks, int rank, bool yes) {
  auto key = [&name](int voter) { return absl::StrCat(name, "/vote/", voter); };
  try {
    store.set(key(rank), {yes ? '1' : '0'});
    std::vector<std::string> keys;
    keys.reserve(ranks.size());
    for (int voter : ranks) keys.push_back(key(voter));
    store.wait(keys);
    bool every = true;
    for (const std::string& voter : keys) {
      const std::vector<char> vote = store.get(voter);
      every = every && vote.size() == 1 && vote[0] == '1';
    }
    return every;
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("vote '", name, "' of rank ", rank, ": ", e.what()));
  }
}

}  // namespace shardwise
