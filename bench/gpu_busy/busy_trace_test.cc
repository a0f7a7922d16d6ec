#include "bench/gpu_busy/busy_trace.h"

#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardwise::gpu_busy {
namespace {

DeviceActivity At(int64_t start, int64_t end, std::string name = "kernel") {
  return {start, end, std::move(name)};
}

// Three steps ended by the marker at 100, 200, 300 and 400 ns. Step 1 (100, 200]: two
// kernels on two streams overlapping (110-150 and 140-170), one inside another (120-130)
// and the marker (190-200): busy 70 of 100. Step 2: a kernel crossing into step 3
// (250-330) with the marker inside it (290-300): busy 50; step 3: the rest of it, 30, and
// the last marker, 10.
TEST(BusyPerStep, CountsOverlappingWorkOnceAndClipsToEachStep) {
  const std::vector<DeviceActivity> trace = {At(90, 100, "AdamWSpansKernel"),
                                             At(110, 150),
                                             At(140, 170),
                                             At(120, 130),
                                             At(190, 200, "AdamWSpansKernel"),
                                             At(250, 330),
                                             At(290, 300, "AdamWSpansKernel"),
                                             At(390, 400, "AdamWSpansKernel")};
  const std::vector<StepBusy> steps = BusyPerStep(trace, "AdamW");
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].begin_ns, 100);
  EXPECT_EQ(steps[0].end_ns, 200);
  EXPECT_EQ(steps[0].busy_ns, 70);
  EXPECT_EQ(steps[1].busy_ns, 50);
  EXPECT_EQ(steps[2].busy_ns, 40);
  EXPECT_DOUBLE_EQ(steps[0].fraction(), 0.7);
}

TEST(BusyPerStep, NeedsTwoMarkersForAStep) {
  EXPECT_TRUE(BusyPerStep({At(0, 10, "AdamW"), At(10, 20)}, "AdamW").empty());
  EXPECT_TRUE(BusyPerStep({At(0, 10), At(10, 20)}, "AdamW").empty());
}

// Two optimizer kernels end each step (one per FSDP unit): steps run from the second of
// one step's to the second of the next's, the first of each inside its step.
TEST(BusyPerStep, TakesTheLastOfEachStepsMarkers) {
  const std::vector<DeviceActivity> trace = {
      At(80, 90, "AdamW"),   At(90, 100, "AdamW"), At(110, 150),          At(170, 180, "AdamW"),
      At(190, 200, "AdamW"), At(210, 260),         At(270, 280, "AdamW"), At(290, 300, "AdamW")};
  auto per_step = MarkersPerStep(trace, "AdamW", 3);
  ASSERT_TRUE(per_step.ok()) << per_step.status();
  EXPECT_EQ(*per_step, 2);
  const std::vector<StepBusy> steps = BusyPerStep(trace, "AdamW", *per_step);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].begin_ns, 100);
  EXPECT_EQ(steps[0].end_ns, 200);
  EXPECT_EQ(steps[0].busy_ns, 40 + 10 + 10);
  EXPECT_EQ(steps[1].begin_ns, 200);
  EXPECT_EQ(steps[1].end_ns, 300);
  EXPECT_EQ(steps[1].busy_ns, 50 + 10 + 10);
}

TEST(MarkersPerStep, RefusesACountThatDoesNotDivideByTheSteps) {
  const std::vector<DeviceActivity> trace = {At(0, 1, "AdamW"), At(1, 2, "AdamW"),
                                             At(2, 3, "AdamW")};
  EXPECT_EQ(MarkersPerStep(trace, "AdamW", 3).value_or(0), 1);
  EXPECT_EQ(MarkersPerStep(trace, "AdamW", 2).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MarkersPerStep(trace, "spin", 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MarkersPerStep(trace, "AdamW", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ParseTrace, ReadsWhatFormatActivityWritesAndNamesABadLine) {
  const DeviceActivity kernel = At(5, 9, "void shardwise::cuda::AdamWSpansKernel<float>(...)");
  std::istringstream good(FormatActivity(kernel) + "\n\n" + FormatActivity(At(9, 9, "memset")));
  auto parsed = ParseTrace(good);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  EXPECT_EQ((*parsed)[0].start_ns, 5);
  EXPECT_EQ((*parsed)[0].end_ns, 9);
  EXPECT_EQ((*parsed)[0].name, kernel.name);
  std::istringstream backwards("1\t2\tk\n9\t3\tk\n");
  auto bad = ParseTrace(backwards);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("trace line 2"), std::string::npos) << bad.status();
}

TEST(Summarize, ReportsTheMedianAfterTheWarmUp) {
  std::vector<StepBusy> steps;
  for (int64_t busy : {10, 50, 90, 95, 97}) steps.push_back({0, 100'000'000, busy * 1'000'000});
  auto summary = Summarize(steps, 2);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(*summary,
            "busy 95.0% of a step (median of 3 steps after 2 skipped; least 90.0%, most 97.0%; "
            "step 100.0 ms)");
  EXPECT_EQ(Summarize(steps, 5).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace shardwise::gpu_busy
