#ifndef SHARDWISE_WORKER_DAEMON_ASSIGNMENT_CHECK_H_
#define SHARDWISE_WORKER_DAEMON_ASSIGNMENT_CHECK_H_

// Whether this worker can run an assignment as the coordinator sent it, before anything
// reads it: a rank outside [0, world_size) (a fault-tolerant job's ranks, numbered across
// its membership, only below 0) would be told as a data plane that could not connect, and a join
// for a job without fault tolerance would leave the world group unconnected while the runtime used
// it; a timeout past kMaxTimeoutMilliseconds (contracts/timeouts.h) would overflow the
// deadlines made from it. Each is the coordinator's fault (a bug, or a release this worker
// does not speak with): INTERNAL, naming the fields and values.

#include "absl/status/status.h"
#include "proto/worker_service.pb.h"

namespace shardwise {

absl::Status CheckAssignment(const v1::Assignment& assignment);

}  // namespace shardwise

#endif  // SHARDWISE_WORKER_DAEMON_ASSIGNMENT_CHECK_H_
