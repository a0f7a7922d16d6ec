#include "worker/daemon/memory_check.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "contracts/memory_estimate.h"

namespace shardwise {

absl::Status CheckRankMemory(const v1::JobSpec& spec, int rank, int64_t available,
                             int64_t data_file_bytes) {
  ASSIGN_OR_RETURN(const MemoryEstimate estimate, EstimateRankMemory(spec, data_file_bytes));
  if (estimate.total() <= available) return absl::OkStatus();
  const bool gpu = spec.device() == v1::CUDA;
  return absl::ResourceExhaustedError(
      absl::StrCat("rank ", rank, " needs about ", estimate.ToString(), ", but this worker has ",
                   FormatBytes(available), gpu ? " free on its GPU" : " of host memory available",
                   "; the attempt did not start"));
}

int64_t DataFileBytes(const v1::JobSpec& spec) {
  if (!spec.data().has_safetensors_path()) return 0;
  struct stat info {};
  if (stat(spec.data().safetensors_path().c_str(), &info) != 0) return 0;
  return static_cast<int64_t>(info.st_size);
}

}  // namespace shardwise
