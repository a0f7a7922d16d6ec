// `shardwise timeline` end to end: worker processes record spans, send them with their
// reports, and the CLI merges every rank into one Chrome trace. The file must be valid
// JSON (parsed here), hold one process per rank, and its spans must nest on each of a
// rank's threads (training; the all-gather and reduction threads, whose collectives
// overlap compute).

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/cluster.h"

namespace shardwise::testing {
namespace {

struct Event {
  std::string name;
  double start = 0, end = 0;
};

// A file this machine cannot write is named with the reason (exit 2: the caller's to
// mend), not as a coordinator away.
void ExpectAnUnwritableFileNamedWithItsReason(Cluster& cluster, const std::string& job_id) {
  const std::string nowhere = cluster.dir() + "/no-such-folder/trace.json";
  std::string output;
  EXPECT_EQ(Cluster::RunCli(
                {"--coordinator=" + cluster.address(), "timeline", job_id, "-o", nowhere}, &output),
            2);
  EXPECT_TRUE(absl::StrContains(
      output, "--output: cannot write '" + nowhere + "': No such file or directory"))
      << output;
}

TEST(Timeline, MergesEveryRankIntoOneNestedChromeTrace) {
  Cluster cluster;
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1", "w2"}) cluster.AddWorker(name);
  v1::JobSpec spec = Cluster::Spec(3);
  spec.set_global_batch_size(24);
  spec.set_steps(12);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));

  const std::string path = cluster.dir() + "/trace.json";
  std::string output;
  ASSERT_EQ(Cluster::RunCli({"--coordinator=" + cluster.address(), "timeline", *job_id, "-o", path},
                            &output),
            0)
      << output;
  EXPECT_TRUE(absl::StrContains(output, "of 3 ranks (attempt 1) written to " + path)) << output;
  ExpectAnUnwritableFileNamedWithItsReason(cluster, *job_id);
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  google::protobuf::Struct trace;
  const auto parsed = google::protobuf::util::JsonStringToMessage(text.str(), &trace);
  ASSERT_TRUE(parsed.ok()) << parsed.ToString();

  std::set<int> processes;
  std::map<std::pair<int, int>, std::vector<Event>> spans;  // by (rank, thread)
  std::set<std::string> names;
  for (const auto& value : trace.fields().at("traceEvents").list_value().values()) {
    const auto& fields = value.struct_value().fields();
    const int pid = static_cast<int>(fields.at("pid").number_value());
    if (fields.at("ph").string_value() == "M") {
      if (fields.at("name").string_value() == "process_name") processes.insert(pid);
      continue;
    }
    ASSERT_EQ(fields.at("ph").string_value(), "X");
    Event e;
    e.name = fields.at("name").string_value();
    e.start = fields.at("ts").number_value();
    e.end = e.start + fields.at("dur").number_value();
    names.insert(e.name.substr(0, e.name.find(" unit")));
    spans[{pid, static_cast<int>(fields.at("tid").number_value())}].push_back(e);
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1, 2}));
  // Each rank has a training thread and two communication threads (all-gathers;
  // reductions).
  EXPECT_EQ(spans.size(), 9u);
  for (const char* expected :
       {"step", "forward", "backward", "all-gather", "reduce-scatter", "all-reduce", "optimizer"}) {
    EXPECT_EQ(names.count(expected), 1u) << expected;
  }
  for (auto& [lane, events] : spans) {
    const int rank = lane.first;
    int steps = 0;
    // Sorted by start (outer first on ties), every span either starts after the
    // enclosing one ends or ends within it.
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<Event> open;
    for (const Event& e : events) {
      while (!open.empty() && open.back().end <= e.start) open.pop_back();
      if (!open.empty()) {
        ASSERT_LE(e.end, open.back().end)
            << "rank " << rank << " thread " << lane.second << ": " << e.name << " [" << e.start
            << ", " << e.end << "] overlaps " << open.back().name << " [" << open.back().start
            << ", " << open.back().end << "] without nesting";
      }
      open.push_back(e);
      steps += e.name == "step";
    }
    if (lane.second == 0) {
      EXPECT_EQ(steps, 12) << "rank " << rank;
    }
  }
}

// The state file keeps an ended attempt's newest spans, `--stored_timeline_spans` shared
// by its ranks, the rest counted as dropped: what a restarted coordinator still shows.
TEST(Timeline, TheStateFileKeepsAnEndedAttemptsNewestSpans) {
  ClusterOptions options;
  options.coordinator_flags = {"--stored_timeline_spans=30"};
  Cluster cluster(options);
  cluster.StartCoordinator();
  for (const char* name : {"w0", "w1"}) cluster.AddWorker(name);
  v1::JobSpec spec = Cluster::Spec(2);
  spec.set_steps(12);
  auto job_id = cluster.client().Submit(spec);
  ASSERT_TRUE(job_id.ok()) << job_id.status();
  cluster.WaitForState(*job_id, v1::SUCCEEDED, absl::Seconds(60));
  auto held = cluster.client().GetTimeline(*job_id);
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_EQ(held->ranks_size(), 2);
  ASSERT_GT(held->ranks(0).spans_size(), 15) << "too few spans for the bound to show";

  cluster.KillCoordinator();
  cluster.StartCoordinator();
  auto kept = cluster.client().GetTimeline(*job_id);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->attempt(), 1);
  ASSERT_EQ(kept->ranks_size(), 2);
  for (const v1::RankTimeline& rank : kept->ranks()) {
    EXPECT_EQ(rank.spans_size(), 15) << "rank " << rank.rank();
    EXPECT_GE(rank.dropped(), 1) << "rank " << rank.rank();
  }
  // The newest: rank 0's last kept span is among the last 15 that memory held.
  const auto& all = held->ranks(0).spans();
  EXPECT_TRUE(std::any_of(all.end() - 15, all.end(), [&](const v1::Span& span) {
    return span.start_us() == kept->ranks(0).spans(14).start_us() &&
           span.name() == kept->ranks(0).spans(14).name();
  }));
}

}  // namespace
}  // namespace shardwise::testing
