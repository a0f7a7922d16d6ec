#include "contracts/job_identity.h"

#include "gtest/gtest.h"

namespace shardwise {
namespace {

TEST(JobIdentity, TheSameJobOnlyWhenIdAndUidAgree) {
  const JobIdentity ours{"job-1", "5f1c0a9e"};
  EXPECT_EQ(ours, (JobIdentity{"job-1", "5f1c0a9e"}));
  EXPECT_NE(ours, (JobIdentity{"job-1", "0badf00d"}));  // another state file's job-1
  EXPECT_NE(ours, (JobIdentity{"job-1", ""}));          // an older release's job-1
  EXPECT_NE(ours, (JobIdentity{"job-2", "5f1c0a9e"}));
  EXPECT_EQ((JobIdentity{"job-1", ""}), (JobIdentity{"job-1", ""}));  // both before uids
}

TEST(JobIdentity, FilesNameTheirWriterInTheirMetadata) {
  const JobIdentity writer{"job-4", "a1b2c3d4e5f60718"};
  const Metadata entries = WriterEntries(writer);
  EXPECT_EQ(entries.at("shardwise.job"), "job-4");
  EXPECT_EQ(entries.at("shardwise.job_uid"), "a1b2c3d4e5f60718");
  EXPECT_EQ(MetadataWriter(entries), writer);
  EXPECT_EQ(WriterEntries(JobIdentity{"job-4", ""}).count("shardwise.job_uid"), 0u);
  EXPECT_EQ(MetadataWriter({{"shardwise.job", "job-4"}}), (JobIdentity{"job-4", ""}));
  EXPECT_EQ(MetadataWriter({}), JobIdentity());

  v1::CheckpointManifest manifest;
  manifest.set_job_id("job-4");
  manifest.set_job_uid("a1b2c3d4e5f60718");
  EXPECT_EQ(ManifestWriter(manifest), writer);
  v1::Job job;
  job.set_id("job-4");
  job.set_uid("a1b2c3d4e5f60718");
  EXPECT_EQ(IdentityOf(job), writer);
}

TEST(JobIdentity, AnotherJobOfTheSameIdIsNamedAsAnother) {
  const JobIdentity ours{"job-1", "5f1c0a9e77"};
  EXPECT_EQ(OtherJobName({"job-3", "aa"}, ours), "job job-3");
  EXPECT_EQ(OtherJobName({"job-1", "0badf00d99"}, ours),
            "another job job-1 (uid 0badf00d..., of another state file)");
  EXPECT_EQ(OtherJobName({"job-1", ""}, ours),
            "another job job-1 (it names no uid: an older release's, or of another state file)");
}

}  // namespace
}  // namespace shardwise
