#include "worker/train/huggingface_export.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/path_policy.h"
#include "common/safe_write.h"
#include "common/status_macros.h"
#include "contracts/huggingface_layout.h"
#include "tokenizer/manifest.h"
#include "worker/data/huggingface_weights.h"
#include "worker/train/final_model_owner.h"

namespace shardwise {
namespace {

// The job's tokenizer in the files transformers reads (tokenizer/manifest.h), and
// generation_config.json with its BOS and EOS ids; the ids, for config.json. Nothing
// without a tokenizer. Files already there holding the same bytes are an earlier
// attempt's and stay.
absl::StatusOr<SpecialTokenIds> ExportTokenizer(const v1::JobSpec& spec, bool replace) {
  const std::string& tokenizer_dir = spec.data().tokens().tokenizer();
  if (tokenizer_dir.empty()) return SpecialTokenIds{};
  const std::string& dir = spec.output().huggingface_dir();
  ASSIGN_OR_RETURN(
      const tokenizer::Manifest manifest,
      tokenizer::CopyHuggingFaceTokenizer(tokenizer_dir, dir, replace, kCheckedPathLinks));
  const SpecialTokenIds ids{manifest.bos_id, manifest.eos_id};
  if (ids.bos.has_value() || ids.eos.has_value()) {
    RETURN_IF_ERROR(WriteFileUnlessSame(dir + "/generation_config.json",
                                        HuggingFaceGenerationConfigJson(ids), replace));
  }
  return ids;
}

// ALREADY_EXISTS when config.json is there and may not be replaced: found before the
// weights are written, since weights naming this job would make the folder its own (a
// restart would then replace a config.json the job did not write).
absl::Status CheckConfigFree(const std::string& dir, bool replace) {
  const std::string config = dir + "/config.json";
  std::error_code error;
  if (replace || std::filesystem::symlink_status(config, error).type() ==
                     std::filesystem::file_type::not_found) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(
      absl::StrCat("'", config,
                   "' exists already; a job never replaces a file it did not create unless "
                   "its spec says output.overwrite: true"));
}

}  // namespace

absl::Status ExportHuggingFace(const v1::JobSpec& spec, const TensorMap& model,
                               const JobIdentity& job, int32_t attempt) {
  const std::string& dir = spec.output().huggingface_dir();
  if (dir.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CreateFolders(dir));
  const std::string model_path = dir + "/model.safetensors";
  const bool replace = spec.output().overwrite() || WrittenByJob(model_path, job);
  const Metadata metadata = WriterMetadata(job, attempt);
  // The tokenizer, then the weights, then config.json: a config.json there names a folder
  // whose other files are in place. Each is replaced on the same terms as the weights (an
  // earlier attempt's, or with overwrite).
  RETURN_IF_ERROR(CheckConfigFree(dir, replace));
  ASSIGN_OR_RETURN(const SpecialTokenIds ids, ExportTokenizer(spec, replace));
  RETURN_IF_ERROR(WriteInHuggingFaceLayout(model_path, spec.model(), model, metadata, replace));
  return WriteFileAtomically(dir + "/config.json", HuggingFaceConfigJson(spec.model(), ids),
                             replace);
}

}  // namespace shardwise
