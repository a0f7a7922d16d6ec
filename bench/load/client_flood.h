#ifndef SHARDWISE_BENCH_LOAD_CLIENT_FLOOD_H_
#define SHARDWISE_BENCH_LOAD_CLIENT_FLOOD_H_

// Many clients calling the coordinator at once, as the scripts of a busy team do: each a
// thread with its own connection and the C++ client library (which retries UNAVAILABLE
// and RESOURCE_EXHAUSTED, and makes submits idempotent), starting together and, for a
// number of rounds, submitting a job, getting it, listing jobs, cancelling it and
// watching it to its end. Every call must succeed; the latencies are per call kind, the
// library's waits and retries included.

#include <cstdint>
#include <string>

#include "bench/load/latency.h"
#include "proto/job_spec.pb.h"

namespace shardwise::load {

struct FloodOptions {
  int clients = 500;
  int rounds = 2;
  v1::JobSpec spec;  // what every client submits (named after the client and round)
};

struct FloodResult {
  Latency submit, get, list, cancel, watch;
  int64_t calls = 0;
  int64_t failed = 0;
  std::string first_failure;  // empty when none failed
  double seconds = 0;         // from the start signal to the last client's end
};

FloodResult RunClientFlood(const std::string& address, const FloodOptions& options);

}  // namespace shardwise::load

#endif  // SHARDWISE_BENCH_LOAD_CLIENT_FLOOD_H_
