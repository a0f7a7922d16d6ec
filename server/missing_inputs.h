#ifndef SHARDWISE_SERVER_MISSING_INPUTS_H_
#define SHARDWISE_SERVER_MISSING_INPUTS_H_

// Whose fault an input missing before an attempt's ranks joined is. Each rank checks the
// job's paths on its own worker's host before it joins the rendezvous
// (worker/daemon/attempt_runner.cc), so a rank that reached the rendezvous found every
// input there. Decided once every rank is known (reported, or reached the rendezvous),
// or at the deadline on what is known. An input missing on a few hosts and found on
// others is those hosts' (a volume not mounted, a copy not made): their workers are kept
// out and the job placed again, its restarts untouched. It is the job's, and the attempt fails for
// good as the spec names files that are not there, when every rank lacks it, when no rank was seen
// with it by the deadline, when more than half of the ranks lack it (a stray copy on a
// few hosts is likelier than most hosts without their volume, and blaming most of the
// cluster would take it out of service), and when the job was placed again without a
// restart kMaxRequeuesWithoutRestart times in a row already (requeue_bound.h: each blame
// of hosts places it again uncounted, and no job may cycle through the cluster's hosts).
//
// A pure function: the controller (job_controller_missing_inputs.cc) gathers what the
// ranks reported and what the rendezvous saw.

#include <cstdint>
#include <set>
#include <vector>

#include "server/requeue_bound.h"

namespace shardwise {

struct MissingInputsDecision {
  enum class Kind {
    kWait,      // some ranks neither reported nor reached the rendezvous yet, and the
                // deadline has not passed
    kTheHosts,  // another rank found its inputs: the reporting ranks' hosts lack them
    kTheJobs,   // as the comment above says
  };
  Kind kind = Kind::kWait;
  std::vector<int32_t> found;  // kTheHosts: the ranks that reached the rendezvous
};

// `missing`: the ranks of a `world_size` attempt that reported an input missing;
// `not_reached`: the ranks that made no rendezvous call (RendezvousStore::RanksNotReached);
// `requeues_without_restart`: how often in a row the job was placed again without
// counting a restart before this attempt (Job.requeues_since_running).
struct MissingInputsFacts {
  int32_t world_size = 0;
  std::set<int32_t> missing;
  std::vector<int32_t> not_reached;
  bool deadline_passed = false;
  int32_t requeues_without_restart = 0;
};
MissingInputsDecision DecideMissingInputs(const MissingInputsFacts& facts);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_MISSING_INPUTS_H_
