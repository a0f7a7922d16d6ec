// The timeline's device spans, with a stream clock whose marks the test passes by hand:
// a span on a host thread yields one on its stream's lane once the device has passed
// both its marks; until then it waits; detaching keeps what was passed and counts the
// rest as dropped.

#include "worker/runtime/timeline.h"

#include <map>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

class ManualStreamClock final : public StreamClock {
 public:
  struct IdMark : Mark {
    explicit IdMark(int id) : id(id) {}
    int id;
  };

  std::unique_ptr<Mark> Record(int* lane) override {
    *lane = kComputeStreamLane;
    return std::make_unique<IdMark>(next_++);
  }
  std::optional<int64_t> PassedAt(const Mark& mark) override {
    auto it = passed_.find(static_cast<const IdMark&>(mark).id);
    if (it == passed_.end()) return std::nullopt;
    return it->second;
  }
  // The device passes mark `id` at `us`.
  void Pass(int id, int64_t us) { passed_[id] = us; }

 private:
  int next_ = 0;
  std::map<int, int64_t> passed_;
};

void ExpectSpan(const v1::Span& span, const char* name, int unit, int64_t step, int lane) {
  EXPECT_EQ(span.name(), name);
  EXPECT_EQ(span.unit(), unit);
  EXPECT_EQ(span.step(), step);
  EXPECT_EQ(span.lane(), lane);
}

TEST(Timeline, WithoutAClockSpansAreTheHostThreadsOnly) {
  Timeline timeline;
  { ScopedSpan span(&timeline, "forward", 3, 7); }
  int64_t dropped = 0;
  const std::vector<v1::Span> spans = timeline.Drain(&dropped);
  ASSERT_EQ(spans.size(), 1u);
  ExpectSpan(spans[0], "forward", 3, 7, 0);
  EXPECT_EQ(dropped, 0);
}

TEST(Timeline, ADeviceSpanComesOutOnceTheDevicePassedBothMarks) {
  Timeline timeline;
  ManualStreamClock clock;
  timeline.AttachStreamClock(&clock);
  { ScopedSpan span(&timeline, "backward", 2, 5); }  // marks 0 and 1
  int64_t dropped = 0;
  std::vector<v1::Span> spans = timeline.Drain(&dropped);
  ASSERT_EQ(spans.size(), 1u);  // the host's; the device has passed nothing yet
  EXPECT_EQ(spans[0].lane(), 0);

  clock.Pass(0, 1'000'000);
  EXPECT_TRUE(timeline.Drain(&dropped).empty()) << "the end mark is not passed";
  clock.Pass(1, 1'000'250);
  spans = timeline.Drain(&dropped);
  ASSERT_EQ(spans.size(), 1u);
  ExpectSpan(spans[0], "backward", 2, 5, kComputeStreamLane);
  EXPECT_EQ(spans[0].start_us(), 1'000'000);
  EXPECT_EQ(spans[0].duration_us(), 250);
  EXPECT_EQ(dropped, 0);
}

TEST(Timeline, SpansResolveInAnyOrderAndDetachingDropsWhatTheDeviceDidNotReach) {
  Timeline timeline;
  ManualStreamClock clock;
  timeline.AttachStreamClock(&clock);
  { ScopedSpan a(&timeline, "all-gather"); }  // marks 0, 1
  { ScopedSpan b(&timeline, "optimizer"); }   // marks 2, 3
  clock.Pass(2, 50);
  clock.Pass(3, 60);
  int64_t dropped = 0;
  std::vector<v1::Span> spans = timeline.Drain(&dropped);
  int device_spans = 0;
  for (const v1::Span& s : spans) {
    if (s.lane() != kComputeStreamLane) continue;
    ++device_spans;
    EXPECT_EQ(s.name(), "optimizer");
  }
  EXPECT_EQ(device_spans, 1);

  timeline.DetachStreamClock();  // "all-gather" never passed: dropped, counted
  spans = timeline.Drain(&dropped);
  EXPECT_TRUE(spans.empty());
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(timeline.stream_clock(), nullptr);
  { ScopedSpan c(&timeline, "step"); }
  spans = timeline.Drain(&dropped);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].lane(), 0);
}

TEST(Timeline, PendingDeviceSpansAreBounded) {
  Timeline timeline(/*capacity=*/4);
  ManualStreamClock clock;
  timeline.AttachStreamClock(&clock);
  int lane = 0;
  for (int i = 0; i < 6; ++i) {
    timeline.AddDeviceSpan(v1::Span(), clock.Record(&lane), clock.Record(&lane));
  }
  int64_t dropped = 0;
  timeline.Drain(&dropped);
  EXPECT_EQ(dropped, 2);
  timeline.DetachStreamClock();
  timeline.Drain(&dropped);
  EXPECT_EQ(dropped, 6);
}

}  // namespace
}  // namespace shardwise
