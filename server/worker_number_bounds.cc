#include "server/worker_number_bounds.h"

#include <algorithm>
#include <cmath>

namespace shardwise {
namespace {

double Rate(double value, double max) {
  return std::isfinite(value) && value > 0 ? std::min(value, max) : 0.0;
}

int64_t Count(int64_t value) { return std::clamp<int64_t>(value, 0, kMaxWorkerCount); }

void BoundProgress(v1::Progress* progress) {
  constexpr double kNoBound = 1e300;
  progress->set_steps_per_second(Rate(progress->steps_per_second(), kNoBound));
  progress->set_tokens_per_second(Rate(progress->tokens_per_second(), kNoBound));
  progress->set_step_seconds(Rate(progress->step_seconds(), kMaxWorkerStepSeconds));
  progress->set_step(Count(progress->step()));
}

}  // namespace

void BoundWorkerNumbers(v1::WorkerMessage* message) {
  switch (message->kind_case()) {
    case v1::WorkerMessage::kReport: {
      v1::AttemptReport* report = message->mutable_report();
      if (report->has_progress()) BoundProgress(report->mutable_progress());
      report->set_spans_dropped(Count(report->spans_dropped()));
      return;
    }
    case v1::WorkerMessage::kHookAck:
      message->mutable_hook_ack()->set_started_step(Count(message->hook_ack().started_step()));
      return;
    default:
      return;
  }
}

}  // namespace shardwise
