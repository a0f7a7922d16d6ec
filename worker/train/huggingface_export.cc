#include "worker/train/huggingface_export.h"

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

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

// What ExportTokenizer wrote: the BOS and EOS ids, for config.json, and the files' names.
struct ExportedTokenizer {
  SpecialTokenIds ids;
  std::set<std::string> names;
};

// The job's tokenizer in the files transformers reads (tokenizer/manifest.h), and
// generation_config.json with its BOS and EOS ids. Nothing without a tokenizer. Files
// already there holding the same bytes are an earlier attempt's and stay.
absl::StatusOr<ExportedTokenizer> ExportTokenizer(const v1::JobSpec& spec, bool replace) {
  const std::string& tokenizer_dir = spec.data().tokens().tokenizer();
  if (tokenizer_dir.empty()) return ExportedTokenizer{};
  const std::string& dir = spec.output().huggingface_dir();
  ASSIGN_OR_RETURN(
      const tokenizer::Manifest manifest,
      tokenizer::CopyHuggingFaceTokenizer(tokenizer_dir, dir, replace, kCheckedPathLinks));
  ExportedTokenizer exported;
  exported.ids = {manifest.bos_id, manifest.eos_id};
  for (const auto& [role, file] : manifest.files) {
    const std::optional<std::string> name = tokenizer::HuggingFaceFileName(manifest.kind, role);
    if (name.has_value()) exported.names.insert(*name);
  }
  if (exported.ids.bos.has_value() || exported.ids.eos.has_value()) {
    RETURN_IF_ERROR(WriteFileUnlessSame(dir + "/generation_config.json",
                                        HuggingFaceGenerationConfigJson(exported.ids), replace));
    exported.names.insert("generation_config.json");
  }
  return exported;
}

// The names of the export's own (HuggingFaceExportNames) that an earlier export may have
// left and this one does not write: another tokenizer kind's files, a
// generation_config.json for a tokenizer without BOS and EOS, an index of other weights.
std::vector<std::string> LeftByAnEarlierExport(const v1::JobSpec& spec,
                                               const std::set<std::string>& written) {
  std::vector<std::string> left;
  for (const std::string& name : HuggingFaceExportNames(spec)) {
    if (name != "model.safetensors" && name != "config.json" && written.count(name) == 0) {
      left.push_back(name);
    }
  }
  return left;
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

absl::Status ExportHuggingFace(const v1::JobSpec& spec, ParameterSource model,
                               const JobIdentity& job, int32_t attempt) {
  const std::string& dir = spec.output().huggingface_dir();
  if (dir.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(CreateFolders(dir));
  const std::string model_path = dir + "/model.safetensors";
  const bool replace = spec.output().overwrite() || WrittenByJob(model_path, job);
  const Metadata metadata = WriterMetadata(job, attempt);
  // The tokenizer, then the weights, then config.json: a config.json there names a folder
  // whose other files are in place. Each is replaced on the same terms as the weights (an
  // earlier attempt's, or with overwrite); replacing, the earlier config.json goes first
  // (an export cut short leaves a folder from_pretrained refuses, not a config.json over
  // two exports' files), and with overwrite the earlier export's files this one does not
  // write go too (AutoTokenizer would read another kind's tokenizer.json before this one's
  // tokenizer.model).
  RETURN_IF_ERROR(CheckConfigFree(dir, replace));
  if (replace) RETURN_IF_ERROR(RemoveFiles(dir, {"config.json"}));
  ASSIGN_OR_RETURN(const ExportedTokenizer tokenizer, ExportTokenizer(spec, replace));
  // Only when told to overwrite: an earlier attempt of this job wrote the same names, so
  // what else is there is a person's.
  if (spec.output().overwrite()) {
    RETURN_IF_ERROR(RemoveFiles(dir, LeftByAnEarlierExport(spec, tokenizer.names)));
  }
  RETURN_IF_ERROR(WriteInHuggingFaceLayout(model_path, spec.model(), model, metadata, replace));
  return WriteFileAtomically(dir + "/config.json",
                             HuggingFaceConfigJson(spec.model(), tokenizer.ids), replace);
}

}  // namespace shardwise
