#include "common/metrics.h"

#include <thread>
#include <vector>

#include "common/metrics_http_server.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace shardwise {
namespace {

TEST(Metrics, WritesThePrometheusTextFormat) {
  MetricsRegistry registry;
  Family<Counter>& requests =
      registry.AddCounter("shardwise_test_requests_total", "Requests,\nby code.", {"code"});
  requests.With({"OK"}).Increment();
  requests.With({"OK"}).Increment(2);
  requests.With({"bad \"quote\"\\"}).Increment();
  Gauge& depth = registry.AddGauge("shardwise_test_depth", "Queue depth.").With({});
  registry.AddCollector([&depth] { depth.Set(7.5); });
  Histogram& latency =
      registry.AddHistogram("shardwise_test_seconds", "Latency.", {0.1, 1}, {"kind"})
          .With({"heartbeat"});
  latency.Observe(0.05);
  latency.Observe(0.1);  // a bound is inclusive
  latency.Observe(5);
  EXPECT_EQ(registry.Exposition(),
            "# HELP shardwise_test_requests_total Requests,\\nby code.\n"
            "# TYPE shardwise_test_requests_total counter\n"
            "shardwise_test_requests_total{code=\"OK\"} 3\n"
            "shardwise_test_requests_total{code=\"bad \\\"quote\\\"\\\\\"} 1\n"
            "# HELP shardwise_test_depth Queue depth.\n"
            "# TYPE shardwise_test_depth gauge\n"
            "shardwise_test_depth 7.5\n"
            "# HELP shardwise_test_seconds Latency.\n"
            "# TYPE shardwise_test_seconds histogram\n"
            "shardwise_test_seconds_bucket{kind=\"heartbeat\",le=\"0.1\"} 2\n"
            "shardwise_test_seconds_bucket{kind=\"heartbeat\",le=\"1\"} 2\n"
            "shardwise_test_seconds_bucket{kind=\"heartbeat\",le=\"+Inf\"} 3\n"
            "shardwise_test_seconds_sum{kind=\"heartbeat\"} 5.15\n"
            "shardwise_test_seconds_count{kind=\"heartbeat\"} 3\n");
}

TEST(Metrics, HistogramQuantilesInterpolateWithinTheirBucket) {
  Histogram histogram({1, 2, 4});
  EXPECT_EQ(histogram.Quantile(0.5), 0);
  for (int i = 0; i < 50; ++i) histogram.Observe(0.5);
  for (int i = 0; i < 50; ++i) histogram.Observe(3);
  EXPECT_DOUBLE_EQ(histogram.Quantile(0.5), 1.0);   // the top of the first bucket
  EXPECT_DOUBLE_EQ(histogram.Quantile(0.75), 3.0);  // half way through (2, 4]
  EXPECT_DOUBLE_EQ(histogram.Quantile(1.0), 4.0);
  histogram.Observe(100);
  EXPECT_DOUBLE_EQ(histogram.Quantile(1.0), 4.0);  // +Inf: the largest finite bound
}

TEST(Metrics, ManyThreadsRecordWithoutLosingCounts) {
  MetricsRegistry registry;
  Counter& counter = registry.AddCounter("c_total", "c").With({});
  Histogram& histogram = registry.AddHistogram("h_seconds", "h", LatencyBuckets()).With({});
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter.Increment();
        histogram.Observe(0.001);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 40000);
  EXPECT_EQ(histogram.count(), 40000u);
  EXPECT_NEAR(histogram.sum(), 40.0, 1e-6);
}

TEST(MetricsHttpServer, ServesTheRegistryOverHttp) {
  MetricsRegistry registry;
  registry.AddCounter("shardwise_test_total", "t").With({}).Increment(4);
  auto server = MetricsHttpServer::Start("127.0.0.1:0", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  auto response = client.Get("/metrics");
  ASSERT_TRUE(response) << httplib::to_string(response.error());
  EXPECT_EQ(response->status, 200);
  EXPECT_NE(response->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_NE(response->body.find("shardwise_test_total 4\n"), std::string::npos);
  EXPECT_EQ(client.Get("/nothing")->status, 404);
  EXPECT_EQ(MetricsHttpServer::Start("no-port", &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The same port twice cannot be bound.
  EXPECT_EQ(MetricsHttpServer::Start(absl::StrCat("127.0.0.1:", (*server)->port()), &registry)
                .status()
                .code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace shardwise
