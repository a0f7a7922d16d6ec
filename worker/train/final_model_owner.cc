#include "worker/train/final_model_owner.h"

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

}  // namespace shardwise
