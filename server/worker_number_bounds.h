#ifndef SHARDWISE_SERVER_WORKER_NUMBER_BOUNDS_H_
#define SHARDWISE_SERVER_WORKER_NUMBER_BOUNDS_H_

// What a worker reports in numbers feeds the coordinator's arithmetic: a step time sets
// how long a replacement waits to join, a rate and a step where a hook switch lands, a
// count of dropped spans a running sum. A worker's bug (or a worker that is not one)
// must not turn those into infinities, overflows or undefined casts, so each such number
// is brought into its range here, as it arrives, beside its texts (worker_text_bounds.h).
// A loss is not touched: a diverging job's NaN is what it reports.

#include <cstdint>

#include "proto/worker_service.pb.h"

namespace shardwise {

// A step or a count past this is no job's (2^53: a double still counts it exactly).
inline constexpr int64_t kMaxWorkerCount = int64_t{1} << 53;
// A step slower than a day is no step the coordinator plans by.
inline constexpr double kMaxWorkerStepSeconds = 86400;

// In place: a progress report's rates and step time finite and non-negative (0 when
// they were not), its step time at most kMaxWorkerStepSeconds, its step and a report's
// dropped spans and a hook ack's started step within [0, kMaxWorkerCount].
void BoundWorkerNumbers(v1::WorkerMessage* message);

}  // namespace shardwise

#endif  // SHARDWISE_SERVER_WORKER_NUMBER_BOUNDS_H_
