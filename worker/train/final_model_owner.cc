#include "worker/train/final_model_owner.h"

#include "contracts/safetensors.h"

namespace shardwise {

bool WrittenByJob(const std::string& path, const std::string& job_id) {
  if (job_id.empty() || path.empty()) return false;
  const absl::StatusOr<Metadata> metadata = ReadSafetensorsMetadata(path);
  if (!metadata.ok()) return false;
  const auto writer = metadata->find(kFinalModelJobKey);
  return writer != metadata->end() && writer->second == job_id;
}

}  // namespace shardwise
