// The Chrome trace of a timeline: a process per rank, a named thread per lane (the GPU's
// streams among them when a rank has device spans), a complete event per span.

#include "client/trace.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardwise {
namespace {

v1::Span MakeSpan(const char* name, int lane, int unit, int64_t start_us, int64_t duration_us) {
  v1::Span span;
  span.set_name(name);
  span.set_lane(lane);
  span.set_unit(unit);
  span.set_step(4);
  span.set_start_us(start_us);
  span.set_duration_us(duration_us);
  return span;
}

TEST(ChromeTrace, NamesEveryLaneItUsesTheGpuStreamsIncluded) {
  v1::Timeline timeline;
  v1::RankTimeline* rank = timeline.add_ranks();
  rank->set_rank(1);
  rank->set_worker_id("gpu-3");
  *rank->add_spans() = MakeSpan("forward", 0, 2, 1000, 50);
  *rank->add_spans() = MakeSpan("forward", 10, 2, 1010, 70);  // what the GPU ran of it
  const std::string json = ChromeTraceJson(timeline);
  EXPECT_TRUE(absl::StrContains(json, "\"args\": {\"name\": \"rank 1 (worker gpu-3)\"}")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"tid\": 0, \"args\": {\"name\": \"training\"}")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"tid\": 10, \"args\": {\"name\": \"GPU: compute stream\"}"))
      << json;
  EXPECT_FALSE(absl::StrContains(json, "GPU: unshard stream")) << "a lane without spans";
  EXPECT_TRUE(absl::StrContains(json,
                                "{\"name\": \"forward unit 2\", \"cat\": \"shardwise\", "
                                "\"ph\": \"X\", \"ts\": 1010, \"dur\": 70, \"pid\": 1, "
                                "\"tid\": 10, \"args\": {\"unit\": 2, \"step\": 4}}"))
      << json;
}

}  // namespace
}  // namespace shardwise
