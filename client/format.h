#ifndef SHARDWISE_CLIENT_FORMAT_H_
#define SHARDWISE_CLIENT_FORMAT_H_

// How the CLI shows jobs and workers: tables, descriptions and the progress line.
// Pure functions of their inputs (the current time is passed in), so tests can pin them.

#include <cstdint>
#include <string>
#include <vector>

#include "proto/job.pb.h"

namespace shardwise {

std::string FormatJobTable(const std::vector<v1::JobSummary>& jobs, int64_t now_ms);
std::string FormatWorkerTable(const std::vector<v1::WorkerInfo>& workers, int64_t now_ms);
std::string FormatJobDescription(const v1::Job& job, int64_t now_ms);

// "[##########..........]  50/100 steps  loss 0.4321  12.5 steps/s  RUNNING", `width`
// characters of bar.
std::string FormatProgressLine(const v1::Job& job, int width = 30);

// `line` cut to at most `columns` characters, ending "…" where cut: a progress line that
// wraps on a terminal cannot be redrawn in place. `columns` <= 0: not cut.
std::string FitToWidth(const std::string& line, int columns);

// The closing lines of `shardwise watch`: final state, reason, loss first -> last,
// steps/s, rank 0's peak memory against the estimate, and the job's result.
std::string FormatJobSummary(const v1::Job& job);

// "3s", "4m", "2h", "5d".
std::string FormatAge(int64_t then_ms, int64_t now_ms);

}  // namespace shardwise

#endif  // SHARDWISE_CLIENT_FORMAT_H_
