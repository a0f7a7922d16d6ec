#include "server/client_auth.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "common/testing/scratch.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

class TokenAuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override { path_ = testing::ScratchPath("tokens.yaml"); }

  void WriteTokens(const std::string& body) {
    const std::string tmp = path_ + ".tmp";
    std::ofstream(tmp) << body;
    std::rename(tmp.c_str(), path_.c_str());
  }

  static std::string Entry(const std::string& principal, const std::string& role,
                           const std::string& token) {
    return "  - principal: " + principal + "\n    role: " + role +
           "\n    sha256: " + TokenAuthenticator::Hash(token) + "\n";
  }

  // Each (file, message) of `cases`, the file after `header`, refused INVALID_ARGUMENT
  // with a message that holds the case's.
  void ExpectEachRefused(const std::vector<std::pair<std::string, std::string>>& cases,
                         const std::string& header = "") {
    for (const auto& [body, message] : cases) {
      WriteTokens(header + body);
      auto tokens = TokenAuthenticator::Load(path_);
      EXPECT_EQ(tokens.status().code(), absl::StatusCode::kInvalidArgument) << body;
      EXPECT_NE(tokens.status().message().find(message), std::string::npos) << tokens.status();
    }
  }

  std::string path_;
};

TEST_F(TokenAuthenticatorTest, KnowsTheTokensByTheirHashOnly) {
  // The well-known SHA-256 of "test".
  EXPECT_EQ(TokenAuthenticator::Hash("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08");
  WriteTokens("tokens:\n" + Entry("alice", "submitter", "a-secret") +
              Entry("root", "admin", "r-secret"));
  auto tokens = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  auto alice = (*tokens)->Authenticate("a-secret");
  ASSERT_TRUE(alice.ok());
  EXPECT_EQ(alice->name, "alice");
  EXPECT_EQ(alice->role, Role::kSubmitter);
  EXPECT_EQ((*tokens)->Authenticate("guess").status().code(), absl::StatusCode::kUnauthenticated);
  // The file never holds a token, so a hash is no token either.
  EXPECT_EQ((*tokens)->Authenticate(TokenAuthenticator::Hash("a-secret")).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(TokenAuthenticatorTest, ReadsTheFileAgainWhenItChangesAndKeepsItOnABadEdit) {
  SimulatedClock clock;
  WriteTokens("tokens:\n" + Entry("alice", "viewer", "old"));
  auto tokens = TokenAuthenticator::Load(path_, &clock);
  ASSERT_TRUE(tokens.ok());
  EXPECT_TRUE((*tokens)->Authenticate("old").ok());
  usleep(20000);  // a modification time the file system can tell apart
  WriteTokens("tokens:\n" + Entry("alice", "viewer", "new"));
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ((*tokens)->Authenticate("old").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE((*tokens)->Authenticate("new").ok());
  usleep(20000);
  EXPECT_FALSE((*tokens)->Stale());
  WriteTokens("tokens: [ {principal: alice, role: king, sha256: 00} ]\n");
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE((*tokens)->Authenticate("new").ok());            // the previous table stays
  EXPECT_TRUE((*tokens)->Stale());                             // and says so (a metric shows it)
  WriteTokens("tokens:\n" + Entry("alice", "viewer", "new"));  // the table in force again
  clock.Advance(absl::Seconds(2));
  EXPECT_FALSE((*tokens)->Stale());
}

// A file written in place (not renamed over) keeps its modification time when the write
// lands within the file system's time granularity: a half-written file, refused, is read
// again once its writer is done, its size telling the versions apart.
TEST_F(TokenAuthenticatorTest, AFileWrittenInPlaceIsReadOnceItIsWhole) {
  SimulatedClock clock;
  WriteTokens("tokens:\n" + Entry("alice", "viewer", "old"));
  auto tokens = TokenAuthenticator::Load(path_, &clock);
  ASSERT_TRUE(tokens.ok());
  struct stat before;
  ASSERT_EQ(::stat(path_.c_str(), &before), 0);
  auto write_in_place_keeping_mtime = [&](const std::string& body) {
    std::ofstream(path_, std::ios::trunc) << body;
    const timespec times[2] = {before.st_atim, before.st_mtim};
    ASSERT_EQ(::utimensat(AT_FDCWD, path_.c_str(), times, 0), 0);
  };
  const std::string whole = "tokens:\n" + Entry("alice", "viewer", "new");
  write_in_place_keeping_mtime(whole.substr(0, 20));  // cut short: does not parse
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE((*tokens)->Authenticate("old").ok());  // kept
  write_in_place_keeping_mtime(whole);
  clock.Advance(absl::Seconds(2));
  EXPECT_TRUE((*tokens)->Authenticate("new").ok());
  EXPECT_EQ((*tokens)->Authenticate("old").status().code(), absl::StatusCode::kUnauthenticated);
}

TEST_F(TokenAuthenticatorTest, RefusesMalformedFilesNamingTheEntry) {
  ExpectEachRefused({
      {"tokens:\n  - {principal: bob, role: king, sha256: " + TokenAuthenticator::Hash("x") + "}\n",
       "entry 1: role 'king'"},
      {"tokens:\n" + Entry("a", "viewer", "x") +
           "  - {principal: b, role: viewer, "
           "sha256: not-a-hash}\n",
       "entry 2: sha256 must be 64 lower-case hex digits"},
      {"tokens:\n" + Entry("a", "viewer", "x") + Entry("b", "admin", "x"),
       "entry 2: the same token twice"},
      {"users: []\n", "expected a list under 'tokens:'"},
  });
}

TEST_F(TokenAuthenticatorTest, AnEntrysFoldersComeWithItsPrincipal) {
  WriteTokens("tokens:\n" + Entry("alice", "submitter", "a1") +
              "    output_paths: [/ck/alice/, /models/alice]\n" +
              Entry("alice", "submitter", "a2") + "    output_paths: [/ck/alice, /models/alice]\n" +
              Entry("bob", "admin", "b"));
  auto tokens = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  for (const char* token : {"a1", "a2"}) {
    auto alice = (*tokens)->Authenticate(token);
    ASSERT_TRUE(alice.ok());
    EXPECT_FALSE(alice->paths.input.has_value());
    ASSERT_TRUE(alice->paths.output.has_value());
    EXPECT_EQ(*alice->paths.output, (std::vector<std::string>{"/ck/alice", "/models/alice"}));
  }
  EXPECT_FALSE((*tokens)->Authenticate("b")->paths.any());

  // The same folders in another order agree; a viewer's entry of the same name binds
  // nothing, so it need not repeat them.
  WriteTokens("tokens:\n" + Entry("alice", "submitter", "a1") + "    input_paths: [/a, /b]\n" +
              Entry("alice", "admin", "a2") + "    input_paths: [/b, /a]\n" +
              Entry("alice", "viewer", "a3"));
  tokens = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_FALSE((*tokens)->Authenticate("a3")->paths.any());
}

TEST_F(TokenAuthenticatorTest, RefusesFoldersThatCannotMeanWhatTheySay) {
  ExpectEachRefused(
      {
          {Entry("a", "submitter", "x") + "    input_paths: data\n",
           "entry 1: input_paths must be a list of absolute folder paths"},
          {Entry("a", "submitter", "x") + "    input_paths: [/data, data/alice]\n",
           "entry 1: input_paths[1]: 'data/alice' is not an absolute path"},
          {Entry("a", "submitter", "x") + "    output_paths: [[/a]]\n",
           "entry 1: output_paths[0] must be a scalar, not a list or mapping"},
          {Entry("a", "submitter", "x") + "    output_paths: [\"/a\\tb\"]\n",
           "entry 1: output_paths[0]: the path '/a"},
          {Entry("v", "viewer", "x") + "    input_paths: [/data]\n",
           "entry 1: input_paths and output_paths keep a principal's jobs to folders; a viewer"},
          {Entry("a", "submitter", "x") + "    output_paths: [/a]\n" +
               Entry("a", "submitter", "y") + "    output_paths: [/b]\n",
           "entry 2: a's input_paths or output_paths differ from its earlier entry's"},
      },
      "tokens:\n");
}

TEST_F(TokenAuthenticatorTest, AWorkerTokensNamesComeWithItsPrincipal) {
  WriteTokens("tokens:\n" + Entry("node7", "worker", "n7") +
              "    worker_names: [node7-*, spare-gpu0]\n" + Entry("pool", "worker", "p"));
  auto tokens = TokenAuthenticator::Load(path_);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const auto node7 = (*tokens)->Authenticate("n7");
  ASSERT_TRUE(node7.ok() && node7->worker_names.has_value());
  EXPECT_EQ(*node7->worker_names, (std::vector<std::string>{"node7-*", "spare-gpu0"}));
  EXPECT_FALSE((*tokens)->Authenticate("p")->worker_names.has_value());  // a pool's: any
}

// A key an entry does not take is refused: misspelt, it would bind nothing in silence.
TEST_F(TokenAuthenticatorTest, RefusesWorkerNamesThatCannotMeanWhatTheySayAndUnknownKeys) {
  ExpectEachRefused(
      {
          {Entry("n", "worker", "x") + "    worker_names: node7-*\n",
           "entry 1: worker_names must be a list of worker names or prefixes ending in '*'"},
          {Entry("n", "worker", "x") + "    worker_names: []\n",
           "entry 1: worker_names must list 1 to 1024 names or prefixes, not 0"},
          {Entry("n", "worker", "x") + "    worker_names: [[w0]]\n",
           "entry 1: worker_names[0] must be a scalar, not a list or mapping"},
          {Entry("n", "worker", "x") + "    worker_names: [node*-gpu0]\n",
           "entry 1: worker_names[0]: 'node*-gpu0' has a '*' before its end"},
          {Entry("n", "worker", "x") + "    worker_names: [\"a b\"]\n",
           "entry 1: worker_names[0]: 'a b' holds a space or '='"},
          {Entry("a", "submitter", "x") + "    worker_names: [w0]\n",
           "entry 1: worker_names bind the names a worker token registers; a submitter's token "
           "registers no worker"},
          {Entry("n", "worker", "x") + "    worker_name: [node7-*]\n",
           "entry 1: unknown key 'worker_name' (an entry has principal, role, sha256, and "
           "optionally input_paths, output_paths or worker_names)"},
          {Entry("a", "submitter", "x") + "    input_path: [/data/a]\n",
           "entry 1: unknown key 'input_path'"},
      },
      "tokens:\n");
}

TEST(Authorize, EachRoleMayDoWhatItsNameSays) {
  const Principal viewer{"vic", Role::kViewer};
  const Principal alice{"alice", Role::kSubmitter};
  const Principal root{"root", Role::kAdmin};
  EXPECT_TRUE(Authorize(viewer, Action::kRead, "list jobs").ok());
  const absl::Status refused = Authorize(viewer, Action::kChangeJob, "cancel jobs", "vic");
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.message().find("vic (viewer) may not cancel jobs"), std::string::npos)
      << refused;
  EXPECT_EQ(Authorize(viewer, Action::kSubmit, "submit jobs").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Authorize(alice, Action::kSubmit, "submit jobs").ok());
  EXPECT_TRUE(Authorize(alice, Action::kChangeJob, "cancel jobs", "alice").ok());
  const absl::Status others = Authorize(alice, Action::kChangeJob, "cancel jobs", "bob");
  EXPECT_EQ(others.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(others.message().find("submitted by bob"), std::string::npos) << others;
  EXPECT_TRUE(Authorize(root, Action::kChangeJob, "cancel jobs", "bob").ok());
  // A worker daemon's token registers workers (WorkerService) and makes no client call.
  const Principal workers{"workers", Role::kWorker};
  for (Action action : {Action::kRead, Action::kSubmit, Action::kChangeJob}) {
    EXPECT_EQ(Authorize(workers, action, "list jobs", "workers").code(),
              absl::StatusCode::kPermissionDenied);
  }
}

}  // namespace
}  // namespace shardwise
