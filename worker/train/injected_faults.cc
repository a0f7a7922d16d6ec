#include "worker/train/injected_faults.h"

#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

// Dies by SIGKILL where it is told (a step, and a phase or collective of it), as a worker
// whose host fails there: fault tolerance must carry the other replicas past it.
class KilledAt final : public TrainingHooks {
 public:
  KilledAt(int64_t step, std::string point) : step_(step), point_(std::move(point)) {}

  void AtPoint(int64_t step, const char* point) override {
    if (step == step_ && point_ == point) raise(SIGKILL);
  }

 private:
  const int64_t step_;
  const std::string point_;
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
  if (absl::ConsumePrefix(&rest, "sigkill_at=")) {
    const size_t colon = rest.find(':');
    if (colon != absl::string_view::npos && colon + 1 < rest.size() &&
        absl::SimpleAtoi(rest.substr(0, colon), &from) && from >= 0) {
      return std::make_shared<KilledAt>(from, std::string(rest.substr(colon + 1)));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--fault_injection: unknown fault '", text,
                   "' (expected unit_order_reversed, unit_order_reversed_from=STEP, "
                   "never_join_rendezvous, sigkill_at=STEP:POINT or leave_after=STEP)"));
}

}  // namespace shardwise
