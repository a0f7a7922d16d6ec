#include "worker/train/injected_faults.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace shardwise {
namespace {

// Records the forward's units in reverse order from step `from` on, as a rank whose
// model ran them in another order would: the coordinator's validation must catch it.
class UnitOrderReversed final : public TrainingHooks {
 public:
  explicit UnitOrderReversed(int64_t from) : from_(from) {}

  void AlterExecutionOrder(int64_t step, v1::ExecutionOrder* order) override {
    if (step < from_) return;
    std::reverse(order->mutable_pre_forward()->begin(), order->mutable_pre_forward()->end());
    std::reverse(order->mutable_post_forward()->begin(), order->mutable_post_forward()->end());
  }

 private:
  const int64_t from_;
};

// Takes its assignments and never joins their rendezvous: the coordinator's join
// deadline must blame it and keep it out of scheduling.
class NeverJoinsRendezvous final : public TrainingHooks {
 public:
  bool StayOutOfRendezvous() override { return true; }
};

// Dies by SIGKILL where it is told (a step, or any, and a phase or collective of it), as
// a worker whose host fails there: fault tolerance must carry the other replicas past it.
class KilledAt final : public TrainingHooks {
 public:
  static constexpr int64_t kAnyStep = -1;
  KilledAt(int64_t step, std::string point) : step_(step), point_(std::move(point)) {}

  void AtPoint(int64_t step, const char* point) override {
    if ((step_ == kAnyStep || step == step_) && point_ == point) raise(SIGKILL);
  }

 private:
  const int64_t step_;
  const std::string point_;
};

// Stops for a while where it is told, as a rank on a host that stalls there (or a slow
// link): a window in which a test can fail something else (the coordinator mid-heal).
class PausedAt final : public TrainingHooks {
 public:
  PausedAt(int64_t step, std::string point, absl::Duration pause)
      : step_(step), point_(std::move(point)), pause_(pause) {}

  void AtPoint(int64_t step, const char* point) override {
    if ((step_ == KilledAt::kAnyStep || step == step_) && point_ == point &&
        !paused_.exchange(true)) {
      // In the worker's log, for the test that acts in the window.
      std::cerr << "fault injection: paused at " << point << " of step " << step << " for "
                << absl::FormatDuration(pause_) << std::endl;
      absl::SleepFor(pause_);
    }
  }

 private:
  const int64_t step_;
  const std::string point_;
  const absl::Duration pause_;
  std::atomic<bool> paused_{false};  // once (AtPoint runs on several threads)
};

// Leaves with its group after a step, as a rank whose worker is shutting down: a
// membership history fixed up front, which a run with a loss must reproduce.
class LeavesAfter final : public TrainingHooks {
 public:
  explicit LeavesAfter(int64_t step) : step_(step) {}
  bool LeaveAfter(int64_t step) override { return step >= step_; }

 private:
  const int64_t step_;
};

// "STEP:POINT" or "any:POINT" (KilledAt::kAnyStep).
bool ParseStepAndPoint(absl::string_view text, int64_t* step, std::string* point) {
  const size_t colon = text.find(':');
  if (colon == absl::string_view::npos || colon + 1 >= text.size()) return false;
  const absl::string_view step_text = text.substr(0, colon);
  if (step_text == "any") {
    *step = KilledAt::kAnyStep;
  } else if (!absl::SimpleAtoi(step_text, step) || *step < 0) {
    return false;
  }
  *point = std::string(text.substr(colon + 1));
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<TrainingHooks>> ParseInjectedFaults(const std::string& text) {
  if (text.empty()) return nullptr;
  if (text == "unit_order_reversed") return std::make_shared<UnitOrderReversed>(0);
  if (text == "never_join_rendezvous") return std::make_shared<NeverJoinsRendezvous>();
  int64_t from = 0;
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "unit_order_reversed_from=") && absl::SimpleAtoi(rest, &from)) {
    return std::make_shared<UnitOrderReversed>(from);
  }
  rest = text;
  if (absl::ConsumePrefix(&rest, "leave_after=") && absl::SimpleAtoi(rest, &from) && from >= 0) {
    return std::make_shared<LeavesAfter>(from);
  }
  rest = text;
  std::string point;
  if (absl::ConsumePrefix(&rest, "sigkill_at=") && ParseStepAndPoint(rest, &from, &point)) {
    return std::make_shared<KilledAt>(from, point);
  }
  rest = text;
  int64_t pause_ms = 0;
  if (absl::ConsumePrefix(&rest, "pause_at=")) {
    const size_t colon = rest.rfind(':');
    if (colon != absl::string_view::npos && absl::SimpleAtoi(rest.substr(colon + 1), &pause_ms) &&
        pause_ms > 0 && ParseStepAndPoint(rest.substr(0, colon), &from, &point)) {
      return std::make_shared<PausedAt>(from, point, absl::Milliseconds(pause_ms));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--fault_injection: unknown fault '", text,
      "' (expected unit_order_reversed, unit_order_reversed_from=STEP, "
      "never_join_rendezvous, sigkill_at=STEP|any:POINT, pause_at=STEP|any:POINT:MS or "
      "leave_after=STEP)"));
}

}  // namespace shardwise
