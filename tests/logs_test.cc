// The daemons' logs as an operator's pipeline reads them (docs/operations.md, "Logs"): real
// coordinator and worker processes with --log_format=json run a job and lose a worker,
// and every line of every log is a JSON object with its time, level and component; the
// lines about the job name it, its attempt and the rank, and each worker's lines name the
// worker.

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

std::vector<nlohmann::json> JsonLines(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json parsed = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_TRUE(parsed.is_object()) << path << ": not a JSON object: " << line;
    if (!parsed.is_object()) continue;
    for (const char* member : {"time", "level", "component", "message"}) {
      EXPECT_TRUE(parsed.contains(member)) << path << ": no " << member << ": " << line;
    }
    lines.push_back(std::move(parsed));
  }
  return lines;
}

// The first line whose message contains `text`, or null.
nlohmann::json LineSaying(const std::vector<nlohmann::json>& lines, const std::string& text) {
  for (const nlohmann::json& line : lines) {
    if (line.contains("message") && line["message"].is_string() &&
        absl::StrContains(line["message"].get<std::string>(), text)) {
      return line;
    }
  }
  return nullptr;
}

TEST(Logs, JsonLinesFromRealDaemonsNameTheJobAttemptRankAndWorker) {
  ClusterOptions options;
  options.coordinator_flags = {"--log_format=json"};
  options.worker_flags = {"--log_format=json"};
  Cluster cluster(options);
  cluster.StartCoordinator();
  cluster.AddWorker("w0");
  cluster.AddWorker("w1");
  auto job_id = cluster.client().Submit(Cluster::Spec(2));
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  cluster.worker("w1").Kill();  // its session closes: lost at once, no heartbeat timeout
  const std::string coordinator_log = cluster.dir() + "/coordinator-1.log";
  // The line, not the state: the registry marks the worker lost before the line is written.
  ASSERT_TRUE(Cluster::WaitFor(
      [&] { return !LineSaying(JsonLines(coordinator_log), "worker lost").is_null(); }));

  const std::vector<nlohmann::json> coordinator = JsonLines(coordinator_log);
  const nlohmann::json serving = LineSaying(coordinator, "serving on port");
  ASSERT_FALSE(serving.is_null()) << "no \"serving on port\" line";
  EXPECT_EQ(serving["level"], "info");
  EXPECT_EQ(serving["component"], "coordinator");
  const nlohmann::json lost = LineSaying(coordinator, "worker lost");
  ASSERT_FALSE(lost.is_null()) << "no \"worker lost\" line";
  EXPECT_EQ(lost["level"], "warning");
  EXPECT_EQ(lost["worker"], "w1");

  for (const std::string name : {"w0", "w1"}) {
    const std::vector<nlohmann::json> worker = JsonLines(cluster.worker(name).log_path());
    ASSERT_FALSE(worker.empty()) << name;
    for (const nlohmann::json& line : worker) {
      EXPECT_EQ(line["component"], "worker") << line.dump();
      EXPECT_EQ(line["worker"], name) << line.dump();
    }
    const nlohmann::json joining = LineSaying(worker, "joining the data plane");
    ASSERT_FALSE(joining.is_null()) << name;
    EXPECT_EQ(joining["job"], *job_id);
    EXPECT_EQ(joining["attempt"], 1);
    EXPECT_TRUE(joining["rank"] == 0 || joining["rank"] == 1) << joining.dump();
  }
}

// A data address this host cannot listen on (not one of its addresses) would fail every
// job the worker is given, each blamed on the job: the worker does not start, naming it.
TEST(Logs, AWorkerThatCannotListenOnItsDataAddressDoesNotStart) {
  const std::string log = ::testing::TempDir() + "/bad-data-address.log";
  Process process({Cluster::BinaryPath("worker/shardwise-worker"), "--coordinator=127.0.0.1:1",
                   "--name=w0", "--data_address=192.0.2.1"},  // TEST-NET-1, not ours
                  log);
  EXPECT_EQ(process.Wait(), 2);
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(output, "--data_address: cannot listen on 192.0.2.1: ")) << output;
}

TEST(Logs, AnUnknownLogFormatStopsTheDaemonNamingTheFlag) {
  for (const std::string target : {"server/shardwise-coordinator", "worker/shardwise-worker"}) {
    const std::string log =
        ::testing::TempDir() + "/bad-format-" + target.substr(target.find('/') + 1) + ".log";
    Process process({Cluster::BinaryPath(target), "--log_format=xml", "--log_level=info"}, log);
    EXPECT_EQ(process.Wait(), 2) << target;
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    EXPECT_TRUE(absl::StrContains(output, "--log_format: \"xml\" is neither text nor json"))
        << target << ": " << output;
  }
}

// A count, bound or period below its floor (a thread pool of none, a reload every 0 s), or
// a timeout past its ceiling, is refused at start naming the flag, rather than raised or
// cut in silence.
TEST(Logs, ANumberFlagOutsideItsBoundsStopsTheDaemonNamingIt) {
  const std::string state_file = ::testing::TempDir() + "/floor-state.db";
  const std::vector<std::string> coordinator = {Cluster::BinaryPath("server/shardwise-coordinator"),
                                                "--address=127.0.0.1:0",
                                                "--state_file=" + state_file};
  const std::vector<std::string> worker = {Cluster::BinaryPath("worker/shardwise-worker"),
                                           "--coordinator=127.0.0.1:1", "--name=w0"};
  const struct {
    const std::vector<std::string>& daemon;
    std::string flag;
    std::string said;
  } cases[] = {
      {coordinator, "--max_sync_threads=2", "--max_sync_threads must be >= 4, got 2"},
      {coordinator, "--stall_warning_ms=0", "--stall_warning_ms must be >= 1, got 0"},
      // "Never" as INT64_MAX would overflow the workers' deadlines made from it.
      {coordinator, "--collective_timeout_ms=9223372036854775807",
       "--collective_timeout_ms must be at most 2592000000 (30 days), got 9223372036854775807"},
      {worker, "--tls_reload_seconds=0", "--tls_reload_seconds must be >= 1, got 0"},
      {worker, "--leave_grace_ms=-5", "--leave_grace_ms must be >= 0, got -5"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = c.daemon;
    argv.push_back(c.flag);
    const std::string log = ::testing::TempDir() + "/floor-" + c.flag.substr(2) + ".log";
    Process process(argv, log);
    // A daemon that took the value would serve on: bounded, so the test fails, not hangs.
    ASSERT_TRUE(Cluster::WaitFor([&] { return !process.Running(); }, absl::Seconds(60)))
        << c.flag << " was taken";
    EXPECT_EQ(process.Wait(), 2) << c.flag;
    std::ifstream in(log);
    const std::string output((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
    EXPECT_TRUE(absl::StrContains(output, c.said)) << c.flag << ": " << output;
  }
}

// A state file that is no SQLite database (a disk's damage, a file put there by mistake)
// stops the coordinator at start with its path and what to do, not SQLite's bare "file is
// not a database".
TEST(Logs, ADamagedStateFileStopsTheCoordinatorNamingItsPath) {
  const std::string state_file = ::testing::TempDir() + "/damaged-state.db";
  std::ofstream(state_file) << std::string(8192, 'x');
  const std::string log = ::testing::TempDir() + "/damaged-state.log";
  Process process({Cluster::BinaryPath("server/shardwise-coordinator"), "--address=127.0.0.1:0",
                   "--state_file=" + state_file},
                  log);
  ASSERT_TRUE(Cluster::WaitFor([&] { return !process.Running(); }, absl::Seconds(60)));
  EXPECT_EQ(process.Wait(), 1);
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(
      absl::StrContains(output, absl::StrCat("state file '", state_file, "': state store: ")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "file is not a database")) << output;
  EXPECT_TRUE(absl::StrContains(output, "restore it from a backup")) << output;
}

}  // namespace
}  // namespace shardwise::testing
