#include "server/missing_inputs.h"

#include <algorithm>

namespace shardwise {

MissingInputsDecision DecideMissingInputs(int32_t world_size, const std::set<int32_t>& missing,
                                          const std::vector<int32_t>& not_reached,
                                          bool deadline_passed) {
  MissingInputsDecision decision;
  for (int32_t rank = 0; rank < world_size; ++rank) {
    const bool reached =
        std::find(not_reached.begin(), not_reached.end(), rank) == not_reached.end();
    // A rank that reported its inputs missing made no rendezvous call; one that did is
    // not counted as having found them all the same.
    if (reached && missing.count(rank) == 0) decision.found.push_back(rank);
  }
  if (!decision.found.empty()) {
    decision.kind = MissingInputsDecision::Kind::kTheHosts;
  } else if (static_cast<int32_t>(missing.size()) >= world_size || deadline_passed) {
    decision.kind = MissingInputsDecision::Kind::kTheJobs;
  }
  return decision;
}

}  // namespace shardwise
