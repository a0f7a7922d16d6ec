#include "common/path_policy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/safe_write.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

namespace fs = std::filesystem;
using Kind = PathPolicy::Kind;

// A scratch tree: ROOT/in (readable), ROOT/out (writable), ROOT/secret (neither).
class PathPolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::ScratchPath(std::string("paths-") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    for (const char* dir : {"in", "out", "secret"}) fs::create_directories(root_ / dir);
    Write(root_ / "in" / "data.bin");
    Write(root_ / "secret" / "key");
    auto policy = PathPolicy::Create({In()}, {Out()}, "/");
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_ = *policy;
  }

  static void Write(const fs::path& path) { std::ofstream(path) << "x"; }
  std::string In() const { return (root_ / "in").string(); }
  std::string Out() const { return (root_ / "out").string(); }
  std::string Secret() const { return (root_ / "secret").string(); }

  fs::path root_;
  PathPolicy policy_;
};

TEST_F(PathPolicyTest, InputsInsideTheRootsComeBackCanonical) {
  auto path =
      policy_.CheckInput("job.data.safetensors_path", In() + "/./sub/../data.bin", Kind::kFile);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, fs::canonical(root_ / "in" / "data.bin").string());
  EXPECT_TRUE(policy_.CheckInput("job.init.checkpoint_dir", In(), Kind::kFolder).ok());
}

TEST_F(PathPolicyTest, InputsOutsideTheRootsAreRefusedNamingTheFieldAndTheValue) {
  const std::string climbing = In() + "/../secret/key";
  auto refused = policy_.CheckInput("job.data.tokens.train_path", climbing, Kind::kFile);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("job.data.tokens.train_path: '" + climbing + "'"),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("--allowed_input_paths"), std::string::npos);
  // A link inside the root that leads out of it.
  fs::create_symlink(root_ / "secret" / "key", root_ / "in" / "link");
  refused = policy_.CheckInput("job.data.safetensors_path", In() + "/link", Kind::kFile);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_EQ(policy_.CheckInput("f", "relative/data.bin", Kind::kFile).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Only an input that is not there is marked missing (a worker's host may lack what others
// have); one of the wrong kind is the spec's error alone.
TEST_F(PathPolicyTest, InputsMustBeRegularFilesThatExist) {
  ASSERT_EQ(mkfifo((root_ / "in" / "fifo").c_str(), 0600), 0);
  const absl::Status fifo = policy_.CheckInput("f", In() + "/fifo", Kind::kFile).status();
  EXPECT_EQ(fifo.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsMissingInput(fifo));
  for (const std::string& missing : {In() + "/missing", In() + "/gone/data.bin"}) {
    const absl::Status status = policy_.CheckInput("f", missing, Kind::kFile).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(), "f: '" + missing + "': no readable file at this path");
    EXPECT_TRUE(IsMissingInput(status)) << missing;
  }
  const absl::Status folder = policy_.CheckInput("f", In(), Kind::kFile).status();
  EXPECT_EQ(folder.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsMissingInput(folder));
  // Through the whole spec, as a worker checks it.
  v1::JobSpec spec;
  spec.mutable_data()->mutable_tokens()->set_train_path(In() + "/missing");
  spec.mutable_output()->set_final_model_path(Out() + "/m.st");
  EXPECT_TRUE(IsMissingInput(ApplyPathPolicy(policy_, PathCheck::kOnDisk, &spec)));
}

TEST_F(PathPolicyTest, OutputsStayInsideTheirRootsAndNeverReplaceUnasked) {
  auto model = policy_.CheckOutput("job.output.final_model_path", Out() + "/new/dir/m.st",
                                   Kind::kFile, false);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(*model, fs::canonical(root_ / "out").string() + "/new/dir/m.st");
  EXPECT_EQ(policy_.CheckOutput("f", In() + "/m.st", Kind::kFile, false).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy_.CheckOutput("f", Out() + "/../secret/m.st", Kind::kFile, false).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Through a link to a folder outside.
  fs::create_directory_symlink(root_ / "secret", root_ / "out" / "escape");
  EXPECT_EQ(policy_.CheckOutput("f", Out() + "/escape/m.st", Kind::kFile, false).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Over an existing file.
  Write(root_ / "out" / "old.st");
  auto existing =
      policy_.CheckOutput("job.output.final_model_path", Out() + "/old.st", Kind::kFile, false);
  EXPECT_EQ(existing.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(existing.status().message().find("output.overwrite: true"), std::string::npos);
  EXPECT_TRUE(policy_.CheckOutput("f", Out() + "/old.st", Kind::kFile, true).ok());
  // A file where a folder would have to be made.
  EXPECT_EQ(policy_.CheckOutput("f", Out() + "/old.st/m.st", Kind::kFile, false).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(PathPolicyTest, ASpecIsRewrittenCanonicalOrRefusedAtItsFirstBadPath) {
  v1::JobSpec spec;
  spec.mutable_data()->mutable_tokens()->set_train_path(In() + "/../in/data.bin");
  spec.mutable_output()->set_final_model_path(Out() + "/model.safetensors");
  spec.mutable_output()->set_checkpoint_dir(Out() + "/checkpoints");
  ASSERT_TRUE(ApplyPathPolicy(policy_, PathCheck::kOnDisk, &spec).ok());
  EXPECT_EQ(spec.data().tokens().train_path(), fs::canonical(root_ / "in" / "data.bin").string());
  spec.mutable_init()->set_checkpoint_dir(Secret());
  const absl::Status refused = ApplyPathPolicy(policy_, PathCheck::kOnDisk, &spec);
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("job.init.checkpoint_dir"), std::string::npos) << refused;
  // Lexically (a coordinator that cannot see the files): missing files pass, escapes not.
  v1::JobSpec unseen;
  unseen.mutable_data()->set_safetensors_path(In() + "/not/here.safetensors");
  EXPECT_TRUE(ApplyPathPolicy(policy_, PathCheck::kLexical, &unseen).ok());
  unseen.mutable_data()->set_safetensors_path(In() + "/../secret/key");
  EXPECT_EQ(ApplyPathPolicy(policy_, PathCheck::kLexical, &unseen).code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(PathPolicyTest, AWorkerChecksAgainstTheRootsItIsSent) {
  const PathPolicy sent = PathPolicy::FromProto(policy_.ToProto());
  EXPECT_TRUE(sent.CheckInput("f", In() + "/data.bin", Kind::kFile).ok());
  EXPECT_EQ(sent.CheckInput("f", Secret() + "/key", Kind::kFile).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(PathPolicy::Create({In() + "/missing"}, {}, "/").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A principal with folders of its own (its tokens-file entry): a path must lie inside the
// coordinator's roots and the principal's, and the error names which refused it.
TEST_F(PathPolicyTest, APrincipalsOwnRootsNarrowTheCoordinators) {
  fs::create_directories(root_ / "out" / "alice");
  fs::create_directories(root_ / "out" / "bob");
  PathPolicy::PrincipalPaths paths;
  paths.output = std::vector<std::string>{Out() + "/alice/./"};
  const v1::SubmitterRoots roots = policy_.RootsOf("alice", paths);
  ASSERT_EQ(roots.output_roots_size(), 1);
  EXPECT_EQ(roots.output_roots(0), Out() + "/alice");  // normal
  ASSERT_EQ(roots.input_roots_size(), 1);
  EXPECT_EQ(roots.input_roots(0), In());  // left out: the coordinator's, narrowing nothing
  const std::optional<PathPolicy> narrowed = policy_.Narrowed(roots);

  EXPECT_TRUE(narrowed->CheckOutput("f", Out() + "/alice/ck", Kind::kFolder, true).ok());
  EXPECT_TRUE(narrowed->CheckInput("f", In() + "/data.bin", Kind::kFile).ok());
  auto others =
      narrowed->CheckOutput("job.output.checkpoint_dir", Out() + "/bob", Kind::kFolder, true);
  EXPECT_EQ(others.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(others.status().message().find("lets alice's jobs write"), std::string::npos)
      << others.status();
  EXPECT_NE(others.status().message().find("output_paths of alice"), std::string::npos);
  // Still inside the coordinator's roots first: its own message where those refuse.
  auto outside = narrowed->CheckOutput("f", Secret() + "/x", Kind::kFolder, true);
  EXPECT_NE(outside.status().message().find("--allowed_output_paths"), std::string::npos);
  // A link in alice's folder to bob's: refused once resolved, lexically allowed.
  fs::create_directory_symlink(root_ / "out" / "bob", root_ / "out" / "alice" / "link");
  EXPECT_EQ(
      narrowed->CheckOutput("f", Out() + "/alice/link/ck", Kind::kFolder, true).status().code(),
      absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(narrowed->CheckLexically("f", Out() + "/alice/link/ck", true).ok());
  EXPECT_EQ(narrowed->CheckLexically("f", Out() + "/bob/ck", true).status().code(),
            absl::StatusCode::kPermissionDenied);

  // The roots travel to a worker with the coordinator's, and narrow there too.
  const v1::PathPolicy proto = narrowed->ToProto();
  EXPECT_EQ(proto.submitter().principal(), "alice");
  EXPECT_FALSE(policy_.ToProto().has_submitter());
  const PathPolicy sent = PathPolicy::FromProto(proto);
  EXPECT_EQ(sent.CheckOutput("f", Out() + "/bob/ck", Kind::kFolder, true).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(sent.CheckOutput("f", Out() + "/alice/ck", Kind::kFolder, true).ok());

  // A principal's folder not made yet resolves as an output would: through a link to its
  // parent, the link's target.
  fs::create_directory_symlink(root_ / "out", root_ / "in" / "to-out");
  paths.output = std::vector<std::string>{In() + "/to-out/carol"};
  const PathPolicy unmade = policy_.Narrowed(policy_.RootsOf("carol", paths));
  EXPECT_TRUE(unmade.CheckOutput("f", Out() + "/carol/ck", Kind::kFolder, true).ok());
  EXPECT_EQ(unmade.CheckOutput("f", Out() + "/alice/ck", Kind::kFolder, true).status().code(),
            absl::StatusCode::kPermissionDenied);
  // An empty list lets the principal's jobs write nowhere.
  paths.output = std::vector<std::string>{};
  const PathPolicy nowhere = policy_.Narrowed(policy_.RootsOf("alice", paths));
  EXPECT_EQ(nowhere.CheckOutput("f", Out() + "/alice/ck", Kind::kFolder, true).status().code(),
            absl::StatusCode::kPermissionDenied);
}

// A worker's own roots bound what any coordinator sends it; errors name the worker's.
TEST_F(PathPolicyTest, AWorkersOwnRootsBoundWhatItIsSent) {
  fs::create_directories(root_ / "out" / "models");
  auto ceiling = PathPolicy::Create({"/"}, {Out() + "/models"}, "/");
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  const PathPolicy bounded = PathPolicy::FromProto(policy_.ToProto()).Within(*ceiling);
  EXPECT_TRUE(bounded.CheckOutput("f", Out() + "/models/m", Kind::kFile, false).ok());
  auto refused =
      bounded.CheckOutput("job.output.final_model_path", Out() + "/m", Kind::kFile, false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("this worker lets jobs write"), std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("the worker's --allowed_output_paths"),
            std::string::npos);
  // The coordinator's roots still bound it (the worker's input side allows everything).
  EXPECT_EQ(bounded.CheckInput("f", Secret() + "/key", Kind::kFile).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(bounded.CheckInput("f", In() + "/data.bin", Kind::kFile).ok());
  // With a submitter's roots too: three layers, each refusing in its own words.
  v1::SubmitterRoots alice;
  alice.set_principal("alice");
  alice.add_input_roots(In());
  alice.add_output_roots(Out() + "/alice");
  const PathPolicy all = policy_.Narrowed(alice).Within(*ceiling);
  EXPECT_NE(all.CheckOutput("f", Out() + "/models/m", Kind::kFile, false)
                .status()
                .message()
                .find("output_paths of alice"),
            std::string::npos);
  EXPECT_TRUE(all.ToProto().has_submitter());
}

// What a worker advertises of its folders, and the coordinator's prediction from it: a
// root reached through a link is listed both ways, so a path the coordinator resolved
// matches either spelling.
TEST_F(PathPolicyTest, AWorkersFoldersPredictWhetherItTakesAJob) {
  fs::create_directory_symlink(root_ / "in", root_ / "data");
  auto ceiling = PathPolicy::Create({(root_ / "data").string()}, {"/"}, "/");
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  const v1::WorkerFolders folders = ceiling->Folders();
  ASSERT_EQ(folders.input_roots_size(), 2);
  EXPECT_EQ(folders.input_roots(0), (root_ / "data").string());
  EXPECT_EQ(folders.input_roots(1), fs::canonical(root_ / "in").string());
  EXPECT_EQ(folders.output_roots_size(), 1);

  v1::JobSpec spec;
  spec.mutable_data()->mutable_tokens()->set_train_path(In() + "/data.bin");
  spec.mutable_data()->mutable_tokens()->set_val_path((root_ / "data" / "val.bin").string());
  spec.mutable_output()->set_checkpoint_dir(Out() + "/ckpt");
  const JobPaths paths = PathsOf(spec);
  ASSERT_EQ(paths.inputs.size(), 2u);
  EXPECT_EQ(paths.inputs[0].path, In() + "/data.bin");
  EXPECT_STREQ(paths.inputs[1].field, "job.data.tokens.val_path");
  EXPECT_EQ(paths.inputs[1].path, (root_ / "data" / "val.bin").string());
  ASSERT_EQ(paths.outputs.size(), 1u);
  EXPECT_EQ(paths.outputs[0].path, Out() + "/ckpt");
  EXPECT_EQ(FirstOutside(folders, paths), nullptr);

  const auto outside = [](const v1::WorkerFolders& folders, const v1::JobSpec& spec) {
    const JobPaths paths = PathsOf(spec);
    const JobPaths::Path* path = FirstOutside(folders, paths);
    return path == nullptr ? std::string("none") : std::string(path->field);
  };
  spec.mutable_init()->set_safetensors_path(Secret() + "/key");  // an input outside
  EXPECT_EQ(outside(folders, spec), "job.init.safetensors_path");
  spec.mutable_init()->clear_safetensors_path();
  v1::WorkerFolders narrow = folders;
  narrow.set_output_roots(0, Out() + "/models");  // the checkpoint folder is outside
  EXPECT_EQ(outside(narrow, spec), "job.output.checkpoint_dir");
  // A root's prefix is not the root: ROOT/input is not under ROOT/in.
  spec.mutable_data()->mutable_tokens()->set_train_path(In() + "put/data.bin");
  EXPECT_EQ(outside(folders, spec), "job.data.tokens.train_path");
}

TEST_F(PathPolicyTest, WritesAreAtomicNeverThroughLinksAndReplaceOnlyWhenAsked) {
  const std::string model = Out() + "/m.safetensors";
  ASSERT_TRUE(WriteFileAtomically(model, "one", /*replace=*/false).ok());
  EXPECT_EQ(WriteFileAtomically(model, "two", /*replace=*/false).code(),
            absl::StatusCode::kAlreadyExists);
  std::ifstream kept(model);
  std::string contents((std::istreambuf_iterator<char>(kept)), std::istreambuf_iterator<char>());
  EXPECT_EQ(contents, "one");
  ASSERT_TRUE(WriteFileAtomically(model, "three", /*replace=*/true).ok());
  int files = 0;
  for (const auto& entry : fs::directory_iterator(root_ / "out")) files += entry.is_regular_file();
  EXPECT_EQ(files, 1);  // no temporary file left behind
  // A link planted where a folder of the output should be: refused, nothing written.
  fs::create_directory_symlink(root_ / "secret", root_ / "out" / "planted");
  EXPECT_EQ(WriteFileAtomically(Out() + "/planted/m.safetensors", "x", true).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(CreateFolders(Out() + "/planted/deeper").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(fs::exists(root_ / "secret" / "m.safetensors"));
  EXPECT_FALSE(fs::exists(root_ / "secret" / "deeper"));
  ASSERT_TRUE(CreateFolders(Out() + "/a/b/c").ok());
  EXPECT_TRUE(fs::is_directory(root_ / "out" / "a" / "b" / "c"));
}

}  // namespace
}  // namespace shardwise
