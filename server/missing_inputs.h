#ifndef SHARDWISE_SERVER_MISSING_INPUTS_H_
#define SHARDWISE_SERVER_MISSING_INPUTS_H_

// Whose fault an input missing before an attempt's ranks joined is. Each rank checks the
// job's paths on its own worker's host before it joins the rendezvous
// (worker/daemon/attempt_runner.cc), so a rank that reached the rendezvous found every
// input there. An input missing on some hosts and found on others is those hosts' (a
// volume not mounted, a copy not made): their workers are kept out and the job placed
// again, its restarts untouched. Missing on every rank's host, or with no rank found to
// have it by the deadline, it is the job's: the attempt fails for good, as the spec names
// files that are not there.
//
// A pure function: the controller (job_controller_missing_inputs.cc) gathers what the
// ranks reported and what the rendezvous saw.

#include <cstdint>
#include <set>
#include <vector>

namespace shardwise {

struct MissingInputsDecision {
  enum class Kind {
    kWait,      // some ranks neither reported nor reached the rendezvous yet
    kTheHosts,  // another rank found its inputs: the reporting ranks' hosts lack them
    kTheJobs,   // every rank lacks them, or none was seen to have them by the deadline
  };
  Kind kind = Kind::kWait;
  std::vector<int32_t> found;  // kTheHosts: the ranks that reached the rendezvous
};

// `missing`: the ranks of a `world_size` attempt that reported an input missing;
// `not_reached`: the ranks that made no rendezvous call (RendezvousStore::RanksNotReached).
MissingInputsDecision DecideMissingInputs(int32_t world_size, const std::set<int32_t>& missing,
                                          const std::vector<int32_t>& not_reached,
                                          bool deadline_passed);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_MISSING_INPUTS_H_
