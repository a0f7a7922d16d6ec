#include "common/log_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "common/log.h"

ABSL_FLAG(std::string, log_format, "text",
          "log lines on stderr: text, or json (one JSON object a line, for log pipelines)");
ABSL_FLAG(std::string, log_level, "info", "the least level logged: debug, info, warning, error");

namespace shardwise {

absl::Status ConfigureLoggingFromFlags(absl::string_view component) {
  return ConfigureLogging(component, absl::GetFlag(FLAGS_log_format),
                          absl::GetFlag(FLAGS_log_level));
}

}  // namespace shardwise
