#include "contracts/checkpoint_fit.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "contracts/checkpoint_files.h"
#include "google/protobuf/util/message_differencer.h"

namespace shardwise::fsdp {
namespace {

// A differing spec is named with its first differences (a config may differ in many
// fields; the first few tell a user which checkpoint this is).
constexpr size_t kMaxDifferenceChars = 300;

// Whether the checkpoint's `written` equals the job's `wanted`; if not, `differences` says
// what differs from one to the other, as "modified: gpt.n_layer: 12 -> 6; ...".
bool Same(const google::protobuf::Message& written, const google::protobuf::Message& wanted,
          std::string* differences) {
  std::string report;
  bool same = false;
  {
    google::protobuf::util::MessageDifferencer differencer;
    differencer.ReportDifferencesToString(&report);  // complete once the differencer is gone
    same = differencer.Compare(written, wanted);
  }
  *differences = absl::StrReplaceAll(absl::StripSuffix(report, "\n"), {{"\n", "; "}});
  if (differences->size() > kMaxDifferenceChars) {
    differences->resize(kMaxDifferenceChars);
    *differences += " ...";
  }
  return same;
}

// INVALID_ARGUMENT naming the differences unless the checkpoint's `written` `what` (the
// model, the wrap policy) is the job's `wanted` one.
absl::Status CheckSame(const std::string& folder, const std::string& what,
                       const google::protobuf::Message& written,
                       const google::protobuf::Message& wanted) {
  std::string differences;
  if (Same(written, wanted, &differences)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("checkpoint '", folder, "' holds another ", what, " than job.", what,
                   " (from the checkpoint's to the job's: ", differences, ")"));
}

}  // namespace

absl::Status CheckCheckpointFits(const std::string& folder, const v1::CheckpointManifest& manifest,
                                 const v1::JobSpec& spec, const FlatLayout& layout) {
  if (absl::Status same = CheckSame(folder, "model", manifest.model(), spec.model()); !same.ok()) {
    return same;
  }
  if (absl::Status same = CheckSame(folder, "wrap", manifest.wrap(), spec.wrap()); !same.ok()) {
    return same;
  }
  if (absl::Status names = CheckShardFileNames(folder, manifest); !names.ok()) return names;
  if (manifest.units_size() != static_cast<int>(layout.units.size())) {
    return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': the manifest lists ",
                                            manifest.units_size(), " units, the model has ",
                                            layout.units.size()));
  }
  for (int u = 0; u < manifest.units_size(); ++u) {
    const int64_t numel = layout.units[u].numel;
    if (manifest.units(u).numel() != numel ||
        manifest.units(u).padded_numel() != PaddedNumel(numel, manifest.shard_group_size())) {
      return absl::DataLossError(absl::StrCat("checkpoint '", folder, "': unit ", u,
                                              " is listed with ", manifest.units(u).numel(),
                                              " parameters, the model's has ", numel));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardwise::fsdp
