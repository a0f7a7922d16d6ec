#include "worker/train/final_model_owner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/path_policy.h"
#include "contracts/safetensors.h"

namespace shardwise {

bool WrittenByJob(const std::string& path, const std::string& job_id) {
  if (job_id.empty() || path.empty()) return false;
  // The header only (at most 100 MiB), only of a regular file, and only where the job's
  // checked path leads (no link in it).
  const absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(path, kCheckedPathLinks);
  if (!index.ok()) return false;
  const auto writer = index->metadata.find(kFinalModelJobKey);
  return writer != index->metadata.end() && writer->second == job_id;
}

Metadata WriterMetadata(const std::string& job_id, int32_t attempt) {
  if (job_id.empty()) return {};
  return {{kFinalModelJobKey, job_id}, {kFinalModelAttemptKey, absl::StrCat(attempt)}};
}

absl::Status CheckNotSuperseded(const std::string& path, const std::string& job_id,
                                int32_t attempt) {
  if (job_id.empty() || path.empty()) return absl::OkStatus();
  const absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(path, kCheckedPathLinks);
  if (!index.ok()) return absl::OkStatus();
  const auto writer = index->metadata.find(kFinalModelJobKey);
  const auto written_by = index->metadata.find(kFinalModelAttemptKey);
  int32_t later = 0;
  if (writer == index->metadata.end() || writer->second != job_id ||
      written_by == index->metadata.end() || !absl::SimpleAtoi(written_by->second, &later) ||
      later <= attempt) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "attempt ", later, " of job ", job_id, " wrote ", path, " already: this attempt (", attempt,
      ") was superseded (its worker lost the coordinator, which ran the job again elsewhere) "
      "and does not replace it"));
}

}  // namespace shardwise
