#include "worker/train/huggingface_export.h"

#include "common/safe_write.h"
#include "common/status_macros.h"
#include "contracts/huggingface_layout.h"
#include "worker/data/huggingface_weights.h"
#include "worker/train/final_model_owner.h"

namespace shardwise {

absl::Status ExportHuggingFace(const v1::JobSpec& spec, const TensorMap& model,
                               const std::string& job_id) {
  const std::string& dir = spec.output().huggingface_dir();
  if (dir.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const TensorMap weights, ToHuggingFaceLayout(spec.model(), model));
  RETURN_IF_ERROR(CreateFolders(dir));
  const std::string model_path = dir + "/model.safetensors";
  const bool replace = spec.output().overwrite() || WrittenByJob(model_path, job_id);
  Metadata metadata;
  if (!job_id.empty()) metadata[kFinalModelJobKey] = job_id;
  // The weights first: a config.json there names a model whose weights are in place. The
  // config is replaced on the same terms as the weights (an earlier attempt's, or with
  // overwrite).
  RETURN_IF_ERROR(WriteSafetensors(model_path, weights, metadata, replace));
  return WriteFileAtomically(dir + "/config.json", HuggingFaceConfigJson(spec.model()), replace);
}

}  // namespace shardwise
