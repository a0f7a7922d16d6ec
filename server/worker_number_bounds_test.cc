#include "server/worker_number_bounds.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace shardwise {
namespace {

// An infinite step time made a replacement's join wait INT64_MAX ms; a NaN rate was cast
// to an integer (undefined) for a hook switch's lead; a step near INT64_MAX overflowed
// when the lead was added.
TEST(WorkerNumberBounds, ProgressNumbersAreBroughtIntoRange) {
  v1::WorkerMessage message;
  v1::Progress* progress = message.mutable_report()->mutable_progress();
  progress->set_step_seconds(std::numeric_limits<double>::infinity());
  progress->set_steps_per_second(std::numeric_limits<double>::quiet_NaN());
  progress->set_tokens_per_second(-5);
  progress->set_step(std::numeric_limits<int64_t>::max());
  progress->set_loss(std::numeric_limits<double>::quiet_NaN());
  message.mutable_report()->set_spans_dropped(-3);
  BoundWorkerNumbers(&message);
  EXPECT_EQ(progress->step_seconds(), 0);
  EXPECT_EQ(progress->steps_per_second(), 0);
  EXPECT_EQ(progress->tokens_per_second(), 0);
  EXPECT_EQ(progress->step(), kMaxWorkerCount);
  EXPECT_TRUE(std::isnan(progress->loss()));  // a diverging job's loss is reported as it is
  EXPECT_EQ(message.report().spans_dropped(), 0);

  progress->set_step_seconds(1e300);
  progress->set_steps_per_second(2.5);
  BoundWorkerNumbers(&message);
  EXPECT_EQ(progress->step_seconds(), kMaxWorkerStepSeconds);
  EXPECT_EQ(progress->steps_per_second(), 2.5);
}

TEST(WorkerNumberBounds, AHookAcksStartedStepStaysInRange) {
  v1::WorkerMessage message;
  message.mutable_hook_ack()->set_started_step(std::numeric_limits<int64_t>::max());
  BoundWorkerNumbers(&message);
  EXPECT_EQ(message.hook_ack().started_step(), kMaxWorkerCount);
  message.mutable_hook_ack()->set_started_step(41);
  BoundWorkerNumbers(&message);
  EXPECT_EQ(message.hook_ack().started_step(), 41);
}

}  // namespace
}  // namespace shardwise
