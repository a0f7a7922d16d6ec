#ifndef SHARDWISE_WORKER_COMM_GROUP_VOTE_H_
#define SHARDWISE_WORKER_COMM_GROUP_VOTE_H_

// A yes/no vote among a group's ranks over the attempt's rendezvous store, before the
// group has a communicator: each rank writes its vote under `name`, then reads every
// rank's. For choices each rank makes from its own host (its NCCL, its environment) that
// the whole group must make alike: the answer is yes only if every rank voted yes, so
// ranks that differ fall back together instead of connecting communicators their peers
// never join.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"

namespace shardwise {

// `ranks`: the group's global ranks; `rank`: this one's (among them). UNAVAILABLE when
// the store fails or times out (its own timeout), naming the vote.
absl::StatusOr<bool> EveryRankVotesYes(gloo::rendezvous::Store& store, const std::string& name,
                                       const std::vector<int>& ranks, int rank, bool yes);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_COMM_GROUP_VOTE_H_
