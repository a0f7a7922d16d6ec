// The Prometheus endpoints of a real coordinator and real workers, scraped over HTTP
// while a job runs and after, checked against what `describe` (GetJob) says.

#include "common/metrics.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

int ReadPort(const std::string& path) {
  int port = 0;
  Cluster::WaitFor([&] {
    std::ifstream in(path);
    return static_cast<bool>(in >> port) && port > 0;
  });
  return port;
}

// The raw text, and its samples.
struct Scrape {
  std::string text;
  std::map<std::string, double> samples;
  double operator[](const std::string& series) const {
    auto it = samples.find(series);
    return it == samples.end() ? -1 : it->second;
  }
};

Scrape Get(int port) {
  httplib::Client client("127.0.0.1", port);
  auto response = client.Get("/metrics");
  Scrape scrape;
  if (response && response->status == 200) {
    scrape.text = response->body;
    scrape.samples = ParseExposition(response->body);
  }
  return scrape;
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(Options());
    cluster_->StartCoordinator();
    coordinator_port_ = cluster_->coordinator_metrics_port();
    for (const std::string worker : {"w0", "w1"}) {
      const std::string port_file = absl::StrCat(cluster_->dir(), "/", worker, ".metrics-port");
      cluster_->AddWorker(worker,
                          {"--metrics_address=127.0.0.1:0", "--metrics_port_file=" + port_file});
      worker_ports_[worker] = ReadPort(port_file);
    }
  }

  // The coordinator's and the workers' figures for the job `running`.
  void ExpectRunningFigures(const std::string& running) {
    const Scrape coordinator = Get(coordinator_port_);
    const v1::Job described = *cluster_->client().Get(running);
    // Every family has its HELP and TYPE.
    for (const char* family : {"shardwise_coordinator_jobs", "shardwise_coordinator_workers",
                               "shardwise_job_step", "shardwise_coordinator_grpc_requests_total",
                               "shardwise_coordinator_worker_message_seconds",
                               "shardwise_coordinator_state_commit_seconds",
                               "shardwise_coordinator_heartbeat_age_max_seconds"}) {
      EXPECT_TRUE(absl::StrContains(coordinator.text, absl::StrCat("# HELP ", family, " ")))
          << family;
      EXPECT_TRUE(absl::StrContains(coordinator.text, absl::StrCat("# TYPE ", family, " ")))
          << family;
    }
    EXPECT_EQ(coordinator["shardwise_coordinator_jobs{state=\"RUNNING\"}"], 1);
    EXPECT_EQ(coordinator["shardwise_coordinator_workers{state=\"BUSY\",device=\"CPU\"}"], 2);
    const double step = coordinator[absl::StrCat("shardwise_job_step{job_id=\"", running, "\"}")];
    EXPECT_GT(step, 0);
    EXPECT_LE(step, described.progress().step());  // scraped first
    EXPECT_EQ(coordinator[absl::StrCat("shardwise_job_total_steps{job_id=\"", running, "\"}")],
              static_cast<double>(described.progress().total_steps()));
    EXPECT_GT(coordinator["shardwise_coordinator_worker_message_seconds_count{kind=\"heartbeat\"}"],
              0);
    EXPECT_GT(coordinator["shardwise_coordinator_state_commit_seconds_count"], 0);
    EXPECT_LT(coordinator["shardwise_coordinator_heartbeat_age_max_seconds"], 5);
    for (const auto& [worker, port] : worker_ports_) {
      const Scrape scrape = Get(port);
      EXPECT_EQ(scrape["shardwise_worker_busy"], 1) << worker;
      EXPECT_GT(scrape["shardwise_worker_collectives_total{kind=\"all_reduce\"}"], 0) << worker;
      EXPECT_GT(scrape["shardwise_worker_collective_seconds_total{kind=\"all_reduce\"}"], 0)
          << worker;
      EXPECT_GT(scrape["shardwise_worker_step"], 0) << worker;
    }
  }

  // RPCs are counted by method and code.
  void ExpectRpcsCounted(const std::string& running) {
    const std::string get_ok =
        "shardwise_coordinator_grpc_requests_total{method=\"/shardwise.v1.JobService/"
        "GetJob\",code=\"OK\"}";
    const std::string get_missing =
        "shardwise_coordinator_grpc_requests_total{method=\"/shardwise.v1.JobService/"
        "GetJob\",code=\"NOT_FOUND\"}";
    const double gets = Get(coordinator_port_)[get_ok];
    ASSERT_TRUE(cluster_->client().Get(running).ok());
    EXPECT_FALSE(cluster_->client().Get("job-404").ok());
    const Scrape after_calls = Get(coordinator_port_);
    EXPECT_EQ(after_calls[get_ok], gets + 1);
    EXPECT_EQ(after_calls[get_missing], 1);
    EXPECT_GT(after_calls["shardwise_coordinator_grpc_request_seconds_count{method=\"/"
                          "shardwise.v1.JobService/GetJob\"}"],
              0);
  }

  // A job that completes after `running` is cancelled: its rank 0's bytes and memory
  // peaks on its worker are describe's, and the job's series are gone once it ended.
  void ExpectCompletedFigures(const std::string& running) {
    ASSERT_TRUE(cluster_->client().Cancel(running).ok());
    ASSERT_TRUE(Cluster::WaitFor([&] {
      return cluster_->WorkerState("w0") == v1::IDLE && cluster_->WorkerState("w1") == v1::IDLE;
    }));
    std::map<std::string, Scrape> before;
    for (const auto& [worker, port] : worker_ports_) before[worker] = Get(port);
    auto short_job = cluster_->client().Submit(Cluster::Spec(2));
    ASSERT_TRUE(short_job.ok());
    const v1::Job done = cluster_->WaitForState(*short_job, v1::SUCCEEDED);
    const std::string rank0 = done.ranks(0).worker_id();
    const Scrape worker = Get(worker_ports_[rank0]);
    for (const auto& [kind, bytes] : std::vector<std::pair<std::string, int64_t>>{
             {"all_gather", done.progress().all_gather_bytes()},
             {"reduce_scatter", done.progress().reduce_scatter_bytes()},
             {"all_reduce", done.progress().all_reduce_bytes()}}) {
      const std::string series =
          absl::StrCat("shardwise_worker_collective_bytes_total{kind=\"", kind, "\"}");
      EXPECT_EQ(worker[series] - std::max(0.0, before[rank0][series]), static_cast<double>(bytes))
          << kind;
    }
    // Its rank's memory peaks, as the job's progress (rank 0's) has them.
    EXPECT_GT(done.progress().peak_allocated_bytes(), 0);
    EXPECT_EQ(worker["shardwise_worker_device_memory_peak_bytes{kind=\"allocated\"}"],
              static_cast<double>(done.progress().peak_allocated_bytes()));
    EXPECT_EQ(worker["shardwise_worker_device_memory_peak_bytes{kind=\"reserved\"}"],
              static_cast<double>(done.progress().peak_reserved_bytes()));
    EXPECT_EQ(worker["shardwise_worker_attempts_total{outcome=\"completed\"}"], 1);
    EXPECT_EQ(worker["shardwise_worker_busy"], 0);
    const Scrape ended = Get(coordinator_port_);
    EXPECT_EQ(ended["shardwise_coordinator_jobs{state=\"SUCCEEDED\"}"], 1);
    EXPECT_EQ(ended["shardwise_coordinator_jobs{state=\"CANCELLED\"}"], 1);
    EXPECT_FALSE(absl::StrContains(ended.text, absl::StrCat("job_id=\"", *short_job, "\"")))
        << "a job that ended keeps no series";
  }

  static ClusterOptions Options() {
    ClusterOptions options;
    options.coordinator_metrics = true;
    return options;
  }

  std::unique_ptr<Cluster> cluster_;
  int coordinator_port_ = 0;
  std::map<std::string, int> worker_ports_;
};

TEST_F(MetricsTest, TheFiguresFollowTheJobAsDescribeShowsIt) {
  ASSERT_GT(coordinator_port_, 0);
  v1::JobSpec long_job = Cluster::Spec(2);
  long_job.set_steps(int64_t{1} << 30);
  auto running = cluster_->client().Submit(long_job);
  ASSERT_TRUE(running.ok()) << running.status();
  cluster_->WaitForState(*running, v1::RUNNING);
  // Each worker's step comes from its own rank's progress reports, which the coordinator's
  // (rank 0's) may precede: waited for too, not assumed.
  ASSERT_TRUE(Cluster::WaitFor([&] {
    bool every_rank_reported = true;
    for (const auto& [worker, port] : worker_ports_) {
      every_rank_reported &= Get(port)["shardwise_worker_step"] > 0;
    }
    return cluster_->client().Get(*running)->progress().step() > 5 && every_rank_reported &&
           Get(coordinator_port_)
                   ["shardwise_coordinator_worker_message_seconds_count{kind=\"heartbeat\"}"] > 0;
  }));

  ExpectRunningFigures(*running);
  ExpectRpcsCounted(*running);
  ExpectCompletedFigures(*running);
}

// Every metric the Grafana dashboard queries and the alerting rules name is one the
// coordinator or a worker exports: a renamed metric would leave a panel empty, or an
// alert silent, with no error anywhere.
TEST_F(MetricsTest, TheDashboardAndTheAlertsQueryOnlyMetricsTheDaemonsExport) {
  std::map<std::string, std::string> exported;  // family -> type
  for (int port : {coordinator_port_, worker_ports_["w0"]}) {
    for (absl::string_view line : absl::StrSplit(Get(port).text, '\n')) {
      if (!absl::ConsumePrefix(&line, "# TYPE ")) continue;
      const std::vector<std::string> fields = absl::StrSplit(line, ' ');
      exported[fields[0]] = fields[1];
    }
  }
  ASSERT_GT(exported.size(), 20u);
  // Exported only by a coordinator with --tokens_file (this one has none): tests/security_test
  // scrapes it there.
  exported["shardwise_coordinator_tokens_file_stale"] = "gauge";
  for (const auto& [path, least] :
       {std::pair<std::string, size_t>{"deploy/grafana/shardwise.json", 15},
        {"deploy/k8s/monitoring/alerts.yaml", 9}}) {
    std::ifstream in(path);
    ASSERT_TRUE(in) << path << " is not in the test's runfiles";
    std::stringstream contents;
    contents << in.rdbuf();
    const std::string text = contents.str();
    std::set<std::string> queried;
    const std::regex metric("shardwise_[a-z_]+");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), metric);
         it != std::sregex_iterator(); ++it) {
      std::string name = it->str();
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        absl::string_view family = name;
        if (absl::ConsumeSuffix(&family, suffix) && exported[std::string(family)] == "histogram") {
          name = std::string(family);
        }
      }
      queried.insert(name);
    }
    EXPECT_GE(queried.size(), least) << path;
    for (const std::string& name : queried) {
      EXPECT_TRUE(exported.count(name) > 0)
          << path << " queries " << name << ", which no daemon exports";
    }
  }
}

}  // namespace
}  // namespace shardwise::testing
