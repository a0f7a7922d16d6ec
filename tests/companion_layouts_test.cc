// The CLI's companion programs (`tokenize` runs shardwise-tokenize; `sample` runs
// shardwise-sample, which runs shardwise-tokenize in turn) from the layouts a user gets,
// run as a user runs them: outside Bazel's test environment (no RUNFILES_DIR, no
// TEST_SRCDIR, a PATH of the system's folders only):
//   - bazel-bin after `bazel build //client:shardwise` and the daemons, as `./dev.sh demo`
//     builds: the CLI has its runfiles tree, the sampler it carries has none of its own;
//   - `bazel run //client:shardwise -- ...`: the same files, run from the CLI's runfiles
//     folder with Bazel's BUILD_WORKING_DIRECTORY naming where the user typed it;
//   - the unpacked bundle (//:bundle): every program in bin/.
// The daemons run from the test's runfiles: they run no companion programs.

#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/scratch.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

namespace fs = std::filesystem;

// How the user got and runs the programs.
enum class Layout { kBazelBin, kBazelRun, kBundle };

std::string LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kBazelBin:
      return "BazelBin";
    case Layout::kBazelRun:
      return "BazelRun";
    case Layout::kBundle:
      return "Bundle";
  }
  return "Unknown";
}

// How gtest prints a failing case's parameter.
void PrintTo(Layout layout, std::ostream* out) { *out << LayoutName(layout); }

// The programs the CLI carries, by their workspace paths.
constexpr const char* kCompanions[] = {"worker/tools/shardwise-sample",
                                       "tokenizer/shardwise-tokenize"};

// The file behind a program in this test's runfiles, put at `to` as a file of its own (a
// link would name the test's tree when the program reads /proc/self/exe).
void PlaceProgram(const std::string& workspace_path, const fs::path& to) {
  const fs::path from = fs::canonical(Cluster::BinaryPath(workspace_path));
  fs::create_directories(to.parent_path());
  std::error_code error;
  fs::create_hard_link(from, to, error);
  if (error) fs::copy_file(from, to);
}

// bazel-bin as a build of only //client:shardwise leaves it: each program at its package
// path, the CLI's runfiles tree linking to the programs it carries, no tree for those.
// Returns the CLI.
std::string MakeBazelBin(const std::string& root) {
  PlaceProgram("client/shardwise", fs::path(root) / "client/shardwise");
  for (const char* companion : kCompanions) {
    const fs::path file = fs::path(root) / companion;
    PlaceProgram(companion, file);
    const fs::path link = fs::path(root) / "client/shardwise.runfiles/shardwise" / companion;
    fs::create_directories(link.parent_path());
    fs::create_symlink(file, link);
  }
  return root + "/client/shardwise";
}

// The unpacked bundle; returns its CLI.
std::string UnpackBundle(const std::string& root) {
  std::string output;
  EXPECT_EQ(RunShell(absl::StrCat("tar -xzf '", Cluster::BinaryPath("shardwise-bundle.tar.gz"),
                                  "' -C '", root, "'"),
                     &output),
            0)
      << output;
  return root + "/bin/shardwise";
}

struct UserRun {
  std::string cwd;
  std::vector<std::string> environment;  // NAME=VALUE, besides PATH, HOME and TMPDIR
  std::vector<std::string> argv;
};

// Runs as from a user's shell: only the variables `run` names, PATH=/usr/bin:/bin and a
// HOME and TMPDIR of the test's; returns the exit code, stdout and stderr in `output`.
int RunAsAUser(const UserRun& run, std::string* output) {
  const std::string home = testing::FreshScratchFolder("home");
  std::string command = absl::StrCat("cd '", run.cwd, "' && exec env -i PATH=/usr/bin:/bin",
                                     " HOME='", home, "' TMPDIR='", home, "'");
  for (const std::string& variable : run.environment) {
    absl::StrAppend(&command, " '", variable, "'");
  }
  for (const std::string& arg : run.argv) absl::StrAppend(&command, " '", arg, "'");
  return RunShell(command, output);
}

class CompanionLayouts : public ::testing::TestWithParam<Layout> {
 protected:
  // A small GPT trained through a SentencePiece tokenizer, which the job copies beside its
  // model (MODEL.tokenizer/), and a greedy sample from it through the test's own runfiles.
  static void SetUpTestSuite() {
    Cluster cluster;
    cluster.StartCoordinator();
    cluster.AddWorker("w0");
    cluster.AddWorker("w1");
    std::string output;
    const std::string tokens = cluster.dir() + "/tokens";
    ASSERT_EQ(Cluster::RunCli({"tokenize", kText, "-o", tokens, "--tokenizer=sentencepiece",
                               "--vocab_size=512"},
                              &output),
              0)
        << output;
    v1::JobSpec spec = Cluster::WithSmallGpt(Cluster::Spec(2), 512, tokens + "/train.bin");
    spec.mutable_data()->mutable_tokens()->set_tokenizer(tokens + "/tokenizer");
    spec.set_global_batch_size(8);
    spec.set_steps(10);
    model_dir_ = new std::string(testing::FreshScratchFolder("model"));
    spec.mutable_output()->set_final_model_path(*model_dir_ + "/" + kModel);
    auto job_id = cluster.client().Submit(spec);
    ASSERT_TRUE(job_id.ok()) << job_id.status();
    cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(90));
    ASSERT_EQ(Cluster::RunCli(
                  {"sample", *model_dir_ + "/" + kModel, kPrompt, "--tokens=20", "--temperature=0"},
                  &output),
              0)
        << output;
    sample_ = new std::string(output);
  }

  static constexpr const char* kText = "/usr/share/common-licenses/GPL-3";
  static constexpr const char* kModel = "gpt.safetensors";
  static constexpr const char* kPrompt = "--prompt=The Program";
  static std::string* model_dir_;
  static std::string* sample_;
};

std::string* CompanionLayouts::model_dir_ = nullptr;
std::string* CompanionLayouts::sample_ = nullptr;

// The CLI to run and how: `model` is the path the user types for the model.
UserRun RunFor(Layout layout, const std::string& root, const std::string& model_dir,
               std::string* model) {
  *model = model_dir + "/gpt.safetensors";
  switch (layout) {
    case Layout::kBazelBin:
      return {root, {}, {MakeBazelBin(root)}};
    case Layout::kBazelRun: {
      // Bazel runs the program in its runfiles folder and says where the user was; a
      // path the user typed is relative to that.
      const std::string cli = MakeBazelBin(root);
      *model = "gpt.safetensors";
      return {cli + ".runfiles/shardwise",
              {"BUILD_WORKING_DIRECTORY=" + model_dir, "BUILD_WORKSPACE_DIRECTORY=" + root},
              {cli}};
    }
    case Layout::kBundle:
      return {root, {}, {UnpackBundle(root)}};
  }
  return {};
}

TEST_P(CompanionLayouts, TokenizeAndSampleRunTheirCompanions) {
  ASSERT_NE(sample_, nullptr) << "the model was not trained";
  const std::string root = testing::FreshScratchFolder("layout");
  std::string model;
  UserRun run = RunFor(GetParam(), root, *model_dir_, &model);
  std::string output;

  UserRun tokenize = run;
  const std::string tokens = testing::FreshScratchFolder("tokens");
  tokenize.argv.insert(tokenize.argv.end(), {"tokenize", kText, "-o", tokens,
                                             "--tokenizer=sentencepiece", "--vocab_size=512"});
  ASSERT_EQ(RunAsAUser(tokenize, &output), 0) << output;
  EXPECT_TRUE(fs::exists(tokens + "/train.bin")) << output;

  UserRun sample = run;
  sample.argv.insert(sample.argv.end(),
                     {"sample", model, kPrompt, "--tokens=20", "--temperature=0"});
  ASSERT_EQ(RunAsAUser(sample, &output), 0) << output;
  EXPECT_TRUE(absl::StartsWith(output, "The Program")) << output;
  EXPECT_GE(output.size(), 24u) << output;
  EXPECT_EQ(output, *sample_);
}

INSTANTIATE_TEST_SUITE_P(Layouts, CompanionLayouts,
                         ::testing::Values(Layout::kBazelBin, Layout::kBazelRun, Layout::kBundle),
                         [](const auto& info) { return LayoutName(info.param); });

}  // namespace
}  // namespace shardwise::testing
