#include "worker/daemon/resume_check.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/path_policy.h"
#include "contracts/checkpoint_files.h"

namespace shardwise {

absl::Status CheckTheJobsCheckpointsAreHere(const std::string& dir, const JobIdentity& job,
                                            int64_t reported_step) {
  std::vector<fsdp::PassedOverStep> passed_over;
  const absl::Status found = fsdp::FindLatestCheckpointOf(dir, job, &passed_over).status();
  if (!absl::IsNotFound(found) || !passed_over.empty()) return absl::OkStatus();
  return MarkMissingInput(absl::UnavailableError(absl::StrCat(
      "job.output.checkpoint_dir: '", dir, "': none of the job's checkpoints on this host, ",
      "but the job wrote its checkpoint of step ", reported_step,
      " there (the folder not mounted here, or the checkpoints removed)")));
}

}  // namespace shardwise
