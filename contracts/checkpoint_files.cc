#include "contracts/checkpoint_files.h"

#include <filesystem>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/printable_text.h"
#include "common/status_macros.h"
#include "contracts/job_identity.h"
#include "google/protobuf/util/json_util.h"

namespace shardwise::fsdp {
namespace {

namespace fs = std::filesystem;
// A manifest lists the model's units: far below this.
constexpr uint64_t kMaxManifestBytes = uint64_t{16} << 20;

// File `name` of step folder `folder`, opened beneath the checkpoint folder.
absl::StatusOr<UntrustedFile> OpenStepFile(const std::string& folder, const std::string& name,
                                           uint64_t max_bytes) {
  const fs::path step(folder);
  return UntrustedFile::OpenBeneath(step.parent_path().string(),
                                    absl::StrCat(step.filename().string(), "/", name), max_bytes);
}

// Whether the step folder `folder`, found a moment ago, is no longer there.
bool StepGone(const std::string& folder) {
  return absl::IsNotFound(ListFolder(folder, Links::kRefuseAll).status());
}

// Whether `read`, an error reading a step, says the step may be a checkpoint this
// process cannot read (now, or with its permissions) rather than what the step holds.
bool ReaderCannotRead(const absl::Status& read) {
  return absl::IsUnavailable(read) || absl::IsPermissionDenied(read);
}

}  // namespace

std::string CheckpointFolder(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step-%08d", dir, step);
}

std::string CheckpointShardFile(int shard_rank) {
  return absl::StrFormat("rank-%05d.safetensors", shard_rank);
}

std::string CheckpointTensorName(int unit, const std::string& what) {
  return absl::StrCat("unit", unit, ".", what);
}

absl::StatusOr<std::map<int64_t, std::string>> CheckpointSteps(const std::string& dir) {
  const absl::StatusOr<std::vector<std::string>> names = ListFolder(dir, Links::kRefuseAll);
  if (!names.ok() && !absl::IsNotFound(names.status())) return names.status();
  std::map<int64_t, std::string> steps;
  for (const std::string& name : names.ok() ? *names : std::vector<std::string>()) {
    int64_t step = 0;
    if (!absl::StartsWith(name, "step-") || !absl::SimpleAtoi(name.substr(5), &step)) continue;
    // Only the spelling CheckpointFolder gives: the ranks agree on a step number and each
    // opens CheckpointFolder(dir, step), which for "step-5" would be another folder.
    const std::string folder = CheckpointFolder(dir, step);
    if (step < 0 || folder != absl::StrCat(dir, "/", name)) continue;
    steps[step] = folder;
  }
  return steps;
}

absl::StatusOr<v1::CheckpointManifest> ReadCheckpointManifest(const std::string& folder) {
  ASSIGN_OR_RETURN(const UntrustedFile file,
                   OpenStepFile(folder, kCheckpointManifest, kMaxManifestBytes));
  ASSIGN_OR_RETURN(const std::string json, file.ReadAll());
  v1::CheckpointManifest manifest;
  // Fields a later release added are left to it: a worker of the release before (both
  // run during an upgrade) still reads the step, rather than passing it over as damaged.
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  if (const auto parsed = google::protobuf::util::JsonStringToMessage(json, &manifest, options);
      !parsed.ok()) {
    return absl::DataLossError(absl::StrCat(
        "checkpoint '", folder, "': unreadable manifest: ", parsed.message().as_string()));
  }
  return manifest;
}

absl::Status CheckpointShardError(const std::string& folder, const absl::Status& read) {
  const absl::StatusCode code = absl::IsInvalidArgument(read) || ReaderCannotRead(read)
                                    ? read.code()
                                    : absl::StatusCode::kDataLoss;
  return absl::Status(code, absl::StrCat("checkpoint '", folder, "': ", read.message()));
}

absl::StatusOr<CheckpointShard> OpenCheckpointShard(const std::string& folder,
                                                    const std::string& name) {
  absl::StatusOr<UntrustedFile> file = OpenStepFile(folder, name, kIndexedSafetensorsFileBytes);
  absl::StatusOr<SafetensorsIndex> index =
      file.ok() ? ReadSafetensorsIndex(*file, absl::StrCat(folder, "/", name)) : file.status();
  if (!index.ok()) return CheckpointShardError(folder, index.status());
  return CheckpointShard{name, *std::move(file), *std::move(index)};
}

absl::Status CheckShardAuthor(const std::string& folder, const v1::CheckpointManifest& manifest,
                              const CheckpointShard& shard) {
  const auto& metadata = shard.index.metadata;
  // A name the shard does not give (a release before it named the uid) is not held
  // against it; one it gives must be the manifest's.
  const JobIdentity writer = MetadataWriter(metadata);
  const JobIdentity named = ManifestWriter(manifest);
  if ((metadata.count(kWriterJobKey) > 0 && writer.id != named.id) ||
      (!writer.uid.empty() && writer.uid != named.uid)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", folder, "': ", shard.name, " was written by ",
                     OtherJobName(writer, named), ", not by job ", ShownValue(named.id),
                     " whose manifest the step holds (two jobs share the checkpoint folder)"));
  }
  if (manifest.attempt() == 0) return absl::OkStatus();
  const auto attempt = metadata.find(kCheckpointAttemptKey);
  if (attempt == metadata.end() || attempt->second == absl::StrCat(manifest.attempt())) {
    return absl::OkStatus();
  }
  absl::Status mixed = absl::DataLossError(
      absl::StrCat("checkpoint '", folder, "': ", shard.name, " was written by attempt ",
                   attempt->second, ", not by attempt ", manifest.attempt(),
                   " whose manifest the step holds (two attempts of the job wrote here)"));
  int64_t shard_attempt = 0;
  if (absl::SimpleAtoi(attempt->second, &shard_attempt) && shard_attempt > manifest.attempt()) {
    mixed.SetPayload(kStepBeingRewritten, absl::Cord(attempt->second));
  }
  return mixed;
}

bool StepBeingRewritten(const absl::Status& check) {
  return check.GetPayload(kStepBeingRewritten).has_value();
}

absl::Status CheckShardFileNames(const std::string& folder,
                                 const v1::CheckpointManifest& manifest) {
  if (manifest.files_size() != manifest.shard_group_size() || manifest.shard_group_size() < 1) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': the manifest lists ",
                                            manifest.files_size(), " shard files for a shard ",
                                            "group of ", manifest.shard_group_size()));
  }
  for (int s = 0; s < manifest.files_size(); ++s) {
    if (manifest.files(s) != CheckpointShardFile(s)) {
      return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': shard file ", s,
                                              " is named '", manifest.files(s), "', expected '",
                                              CheckpointShardFile(s), "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCheckpointComplete(const std::string& folder, int64_t step,
                                     const v1::CheckpointManifest& manifest) {
  if (manifest.step() != step) {
    return absl::DataLossError(
        absl::StrCat("checkpoint '", folder, "': its manifest says step ", manifest.step()));
  }
  RETURN_IF_ERROR(CheckShardFileNames(folder, manifest));
  for (const std::string& name : manifest.files()) {
    ASSIGN_OR_RETURN(const CheckpointShard shard, OpenCheckpointShard(folder, name));
    RETURN_IF_ERROR(CheckShardAuthor(folder, manifest, shard));
  }
  return absl::OkStatus();
}

namespace {

absl::StatusOr<FoundCheckpoint> LatestCheckpoint(const std::string& dir, const JobIdentity* writer,
                                                 std::vector<PassedOverStep>* passed_over) {
  ASSIGN_OR_RETURN(const auto steps, CheckpointSteps(dir));
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {  // newest first
    const auto& [step, folder] = *it;
    // Incomplete (the manifest is written last), not a checkpoint this job may read, or
    // not this folder's step, or mixed with another attempt's shards: passed over.
    // What this host could not read now, or this process may not read, is not passed
    // over: the attempt would start from an older step, or from its seed, for an NFS
    // hiccup or a file's permissions. Unless the step is gone meanwhile (removed by
    // output.keep_checkpoints: a stale NFS handle says UNAVAILABLE).
    const absl::StatusOr<v1::CheckpointManifest> manifest = ReadCheckpointManifest(folder);
    if (ReaderCannotRead(manifest.status())) {
      if (StepGone(folder)) continue;
      return manifest.status();
    }
    if (absl::IsNotFound(manifest.status())) continue;  // a write cut short: not damage
    if (!manifest.ok()) {
      if (passed_over != nullptr && !StepGone(folder)) {
        passed_over->push_back({step, std::string(manifest.status().message())});
      }
      continue;
    }
    if (writer != nullptr && ManifestWriter(*manifest) != *writer) continue;
    const absl::Status complete = CheckCheckpointComplete(folder, step, *manifest);
    if (ReaderCannotRead(complete)) {
      if (StepGone(folder)) continue;
      return complete;
    }
    if (complete.ok()) return FoundCheckpoint{step, folder, *manifest};
    // Damage, not a later attempt's rewrite cut short, nor a step removed meanwhile.
    if (passed_over != nullptr && !StepBeingRewritten(complete) && !StepGone(folder)) {
      passed_over->push_back({step, std::string(complete.message())});
    }
  }
  return absl::NotFoundError(absl::StrCat("no complete checkpoint in '", dir, "'",
                                          writer == nullptr ? "" : " for job " + writer->id));
}

}  // namespace

absl::StatusOr<FoundCheckpoint> FindLatestCheckpoint(const std::string& dir) {
  return LatestCheckpoint(dir, nullptr, nullptr);
}

absl::StatusOr<FoundCheckpoint> FindLatestCheckpointOf(const std::string& dir,
                                                       const JobIdentity& writer,
                                                       std::vector<PassedOverStep>* passed_over) {
  return LatestCheckpoint(dir, &writer, passed_over);
}

}  // namespace shardwise::fsdp
