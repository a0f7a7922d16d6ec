#ifndef SHARDWISE_BENCH_BENCH_MODEL_H_
#define SHARDWISE_BENCH_BENCH_MODEL_H_

// What the GPT benchmarks train: the GPT benchmark model and its data, the license texts
// every Debian system ships as byte tokens.

#include <string>

#include "proto/job_spec.pb.h"

namespace shardwise::bench {

// 4 layers, 256 wide, 4 heads, 128 context, 256 byte tokens.
v1::GptConfig BenchGpt();

// Writes the concatenated license texts as uint16 byte tokens to `path`; returns it.
std::string WriteLicenseTokens(std::string path);

}  // namespace shardwise::bench

#endif  // SHARDWISE_BENCH_BENCH_MODEL_H_
