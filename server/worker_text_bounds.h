#ifndef SHARDWISE_SERVER_WORKER_TEXT_BOUNDS_H_
#define SHARDWISE_SERVER_WORKER_TEXT_BOUNDS_H_

// What a worker writes in words reaches the coordinator's state file and every reply that
// shows a job: a report's message becomes the job's reason, result and events; a probe's
// error becomes a quarantine reason; a position's phase and collective become a stall
// warning. A worker's session allows messages of up to 4 MiB, so each such text is cut
// here, as it arrives, to what a person reads (a job's reason is a sentence, not a file),
// and a `ListJobs` page of summaries stays far under the reply limit.

#include <cstddef>

#include "proto/worker_service.pb.h"

namespace shardwise {

inline constexpr size_t kMaxWorkerMessageBytes = 4096;  // a report's message, a probe's error
inline constexpr size_t kMaxWorkerLabelBytes = 256;     // a phase, a collective's name

// Cuts `message`'s texts in place, at UTF-8 character boundaries, saying so.
void BoundWorkerText(v1::WorkerMessage* message);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_TEXT_BOUNDS_H_
