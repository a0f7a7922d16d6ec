#include "server/missing_inputs.h"

#include <algorithm>

namespace shardwise {

MissingInputsDecision DecideMissingInputs(const MissingInputsFacts& facts) {
  MissingInputsDecision decision;
  for (int32_t rank = 0; rank < facts.world_size; ++rank) {
    const bool reached = std::find(facts.not_reached.begin(), facts.not_reached.end(), rank) ==
                         facts.not_reached.end();
    // A rank that reported its inputs missing made no rendezvous call; one that did is
    // not counted as having found them all the same.
    if (reached && facts.missing.count(rank) == 0) decision.found.push_back(rank);
  }
  const int32_t missing = static_cast<int32_t>(facts.missing.size());
  // Every rank known (it reported, or reached the rendezvous), or the deadline: decided on
  // the whole picture, so that hosts are blamed all at once and only when few.
  const int32_t known = missing + static_cast<int32_t>(decision.found.size());
  if (known < facts.world_size && !facts.deadline_passed) return decision;  // kWait
  const bool hosts_may_be_blamed = 2 * missing <= facts.world_size &&
                                   facts.requeues_without_restart < kMaxRequeuesWithoutRestart;
  decision.kind = hosts_may_be_blamed && !decision.found.empty()
                      ? MissingInputsDecision::Kind::kTheHosts
                      : MissingInputsDecision::Kind::kTheJobs;
  return decision;
}

}  // namespace shardwise
