#ifndef SHARDWISE_COMMON_LOG_H_
#define SHARDWISE_COMMON_LOG_H_

// The daemons' logs: a line per event on standard error with its time (UTC, ms), its level,
// the daemon, and the job, attempt, rank and worker it concerns. As text:
//   2026-11-26T10:31:29.123Z warning coordinator job=job-1 attempt=2 worker=w0: ...
// or, with --log_format=json, a JSON object a line for log pipelines (Loki, Elasticsearch):
//   {"time":"2026-11-26T10:31:29.123Z","level":"warning","component":"coordinator",
//    "job":"job-1","attempt":2,"worker":"w0","message":"..."}
// spdlog (Debian's libspdlog-dev) writes the lines: the time, the level and its filter, and
// a lock so that lines from several threads never interleave; each is flushed as written.
// nlohmann/json escapes the JSON. Lines logged before ConfigureLogging go out as text at
// level info, with the component "shardwise".

#include <iosfwd>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace shardwise {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// What a line is about; each field that is set is printed. Set them in a chain:
//   LogContext().Job(id).Attempt(2).Rank(0)
class LogContext {
 public:
  LogContext& Job(std::string job) {
    job_ = std::move(job);
    return *this;
  }
  LogContext& Attempt(int attempt) {  // attempts count from 1; 0 is none
    attempt_ = attempt;
    return *this;
  }
  LogContext& Rank(int rank) {  // -1 is none
    rank_ = rank;
    return *this;
  }
  LogContext& Worker(std::string worker) {
    worker_ = std::move(worker);
    return *this;
  }

  // This context, with each field it does not set taken from `base`.
  LogContext WithDefaults(const LogContext& base) const;

  // The line's content after the time, level and component: "job=j attempt=2: message"
  // as text, or the JSON members `"job":"j","attempt":2,"message":"..."` (no braces).
  std::string Payload(LogFormat format, absl::string_view message) const;

 private:
  std::string job_;
  int attempt_ = 0;
  int rank_ = -1;
  std::string worker_;
};

// How this process logs, set at start: `component` names the daemon in every line;
// `format` is "text" or "json"; `level` the least level written: "debug", "info",
// "warning" or "error". INVALID_ARGUMENT naming the flag (--log_format, --log_level) and
// the value. Lines go to `out` when given (tests; it must outlive every line logged until
// the next ConfigureLogging), else standard error. Thread-safe: a line logged meanwhile
// goes out as before or as after.
absl::Status ConfigureLogging(absl::string_view component, absl::string_view format,
                              absl::string_view level, std::ostream* out = nullptr);

// What every line of this process is about unless it says otherwise: a worker daemon's
// name. Set at start, as ConfigureLogging.
void SetProcessLogContext(const LogContext& context);

void Log(LogLevel level, const LogContext& context, absl::string_view message);

inline void LogDebug(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kDebug, context, message);
}
inline void LogInfo(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kInfo, context, message);
}
inline void LogWarning(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kWarning, context, message);
}
inline void LogError(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kError, context, message);
}

}  // namespace shardwise

#endif  // SHARDWISE_COMMON_LOG_H_
