#include "contracts/job_identity.h"

#include "absl/strings/str_cat.h"
#include "common/printable_text.h"

namespace shardwise {

JobIdentity IdentityOf(const v1::Job& job) { return JobIdentity{job.id(), job.uid()}; }

JobIdentity ManifestWriter(const v1::CheckpointManifest& manifest) {
  return JobIdentity{manifest.job_id(), manifest.job_uid()};
}

JobIdentity MetadataWriter(const Metadata& metadata) {
  JobIdentity writer;
  if (const auto id = metadata.find(kWriterJobKey); id != metadata.end()) writer.id = id->second;
  if (const auto uid = metadata.find(kWriterJobUidKey); uid != metadata.end()) {
    writer.uid = uid->second;
  }
  return writer;
}

Metadata WriterEntries(const JobIdentity& writer) {
  Metadata entries{{kWriterJobKey, writer.id}};
  if (!writer.uid.empty()) entries[kWriterJobUidKey] = writer.uid;
  return entries;
}

std::string OtherJobName(const JobIdentity& other, const JobIdentity& self) {
  if (other.id != self.id) return absl::StrCat("job ", ShownValue(other.id));
  if (other.uid.empty()) {
    return absl::StrCat("another job ", ShownValue(other.id),
                        " (it names no uid: an older release's, or of another state file)");
  }
  return absl::StrCat("another job ", ShownValue(other.id), " (uid ",
                      ShownValue(other.uid.substr(0, 8)), "..., of another state file)");
}

}  // namespace shardwise
