#include "common/log.h"

// Debian's spdlog is a compiled, shared library over Debian's fmt (pkg-config's flags);
// said here rather than in the build graph so that every build of this file (the fuzz
// build's too, tests/fuzz/run.sh) sees them.
#define SPDLOG_COMPILED_LIB
#define SPDLOG_SHARED_LIB
#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <functional>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace shardwise {
namespace {

struct Logging {
  std::shared_ptr<spdlog::logger> logger;
  LogFormat format = LogFormat::kText;
  LogContext process;  // SetProcessLogContext
};

// spdlog's pattern for each format; %v is LogContext::Payload. Times are UTC.
std::string Pattern(LogFormat format, absl::string_view component) {
  if (format == LogFormat::kText) {
    return absl::StrCat("%Y-%m-%dT%H:%M:%S.%eZ %l ", component, " %v");
  }
  return absl::StrCat(R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","component":)",
                      nlohmann::json(std::string(component)).dump(), ",%v}");
}

std::shared_ptr<spdlog::logger> MakeLogger(absl::string_view component, LogFormat format,
                                           spdlog::level::level_enum level, std::ostream* out) {
  spdlog::sink_ptr sink;
  if (out != nullptr) {
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out, /*force_flush=*/true);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  auto logger = std::make_shared<spdlog::logger>("shardwise", std::move(sink));
  logger->set_formatter(std::make_unique<spdlog::pattern_formatter>(
      Pattern(format, component), spdlog::pattern_time_type::utc));
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);  // every line, so that a crash loses none
  return logger;
}

// How this process logs. Log() takes a snapshot, and a change (ConfigureLogging,
// SetProcessLogContext) replaces it whole, so a thread logging meanwhile uses the old one.
absl::Mutex& LoggingMutex() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

std::shared_ptr<const Logging>& CurrentLocked() {
  static auto* current = new std::shared_ptr<const Logging>(std::make_shared<const Logging>(
      Logging{MakeLogger("shardwise", LogFormat::kText, spdlog::level::info, nullptr),
              LogFormat::kText, LogContext()}));
  return *current;
}

std::shared_ptr<const Logging> Current() {
  absl::MutexLock lock(&LoggingMutex());
  return CurrentLocked();
}

void Replace(const std::function<void(Logging&)>& change) {
  absl::MutexLock lock(&LoggingMutex());
  auto next = std::make_shared<Logging>(*CurrentLocked());
  change(*next);
  CurrentLocked() = std::move(next);
}

spdlog::level::level_enum SpdlogLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      break;
  }
  return spdlog::level::err;
}

}  // namespace

LogContext LogContext::WithDefaults(const LogContext& base) const {
  LogContext merged = *this;
  if (merged.job_.empty()) merged.job_ = base.job_;
  if (merged.attempt_ == 0) merged.attempt_ = base.attempt_;
  if (merged.rank_ < 0) merged.rank_ = base.rank_;
  if (merged.worker_.empty()) merged.worker_ = base.worker_;
  return merged;
}

std::string LogContext::Payload(LogFormat format, absl::string_view message) const {
  if (format == LogFormat::kJson) {
    nlohmann::ordered_json members;
    if (!job_.empty()) members["job"] = job_;
    if (attempt_ > 0) members["attempt"] = attempt_;
    if (rank_ >= 0) members["rank"] = rank_;
    if (!worker_.empty()) members["worker"] = worker_;
    members["message"] = std::string(message);
    // Invalid UTF-8 (a path, a peer's text) is replaced, never a reason to lose the line.
    const std::string object =
        members.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return object.substr(1, object.size() - 2);
  }
  std::string subject;
  if (!job_.empty()) absl::StrAppend(&subject, "job=", job_, " ");
  if (attempt_ > 0) absl::StrAppend(&subject, "attempt=", attempt_, " ");
  if (rank_ >= 0) absl::StrAppend(&subject, "rank=", rank_, " ");
  if (!worker_.empty()) absl::StrAppend(&subject, "worker=", worker_, " ");
  // A line per event: a message's own line breaks are escaped.
  std::string text = absl::StrReplaceAll(message, {{"\n", "\\n"}, {"\r", "\\r"}});
  if (subject.empty()) return text;
  subject.back() = ':';
  return absl::StrCat(subject, " ", text);
}

absl::Status ConfigureLogging(absl::string_view component, absl::string_view format,
                              absl::string_view level, std::ostream* out) {
  LogFormat log_format;
  if (format == "text") {
    log_format = LogFormat::kText;
  } else if (format == "json") {
    log_format = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_format: \"", format, "\" is neither text nor json"));
  }
  if (level != "debug" && level != "info" && level != "warning" && level != "error") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_level: \"", level, "\" is none of debug, info, warning and error"));
  }
  auto logger = MakeLogger(component, log_format, spdlog::level::from_str(std::string(level)), out);
  Replace([&](Logging& logging) {
    logging.logger = std::move(logger);
    logging.format = log_format;
  });
  return absl::OkStatus();
}

void SetProcessLogContext(const LogContext& context) {
  Replace([&context](Logging& logging) { logging.process = context; });
}

void Log(LogLevel level, const LogContext& context, absl::string_view message) {
  const std::shared_ptr<const Logging> logging = Current();
  const spdlog::level::level_enum spdlog_level = SpdlogLevel(level);
  if (!logging->logger->should_log(spdlog_level)) return;
  const std::string payload =
      context.WithDefaults(logging->process).Payload(logging->format, message);
  logging->logger->log(spdlog_level, spdlog::string_view_t(payload.data(), payload.size()));
}

}  // namespace shardwise
