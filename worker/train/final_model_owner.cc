#include "worker/train/final_model_owner.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/path_policy.h"
#include "contracts/safetensors.h"

namespace shardwise {

bool WrittenByJob(const std::string& path, const JobIdentity& job) {
  if (job.id.empty() || path.empty()) return false;
  // The header only (at most 100 MiB), only of a regular file, and only where the job's
  // checked path leads (no link in it).
  const absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(path, kCheckedPathLinks);
  if (!index.ok()) return false;
  return MetadataWriter(index->metadata) == job;
}

Metadata WriterMetadata(const JobIdentity& job, int32_t attempt) {
  if (job.id.empty()) return {};
  Metadata metadata = WriterEntries(job);
  metadata[kFinalModelAttemptKey] = absl::StrCat(attempt);
  return metadata;
}

absl::Status CheckNotSuperseded(const std::string& path, const JobIdentity& job, int32_t attempt) {
  if (job.id.empty() || path.empty()) return absl::OkStatus();
  const absl::StatusOr<SafetensorsIndex> index = ReadSafetensorsIndex(path, kCheckedPathLinks);
  if (!index.ok()) return absl::OkStatus();
  const auto written_by = index->metadata.find(kFinalModelAttemptKey);
  int32_t later = 0;
  if (MetadataWriter(index->metadata) != job || written_by == index->metadata.end() ||
      !absl::SimpleAtoi(written_by->second, &later) || later <= attempt) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "attempt ", later, " of job ", job.id, " wrote ", path, " already: this attempt (", attempt,
      ") was superseded (its worker lost the coordinator, which ran the job again elsewhere) "
      "and does not replace it"));
}

}  // namespace shardwise
