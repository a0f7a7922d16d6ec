#include "worker/train/injected_faults.h"

#include <algorithm>
#include <cstdint>

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
  return absl::InvalidArgumentError(
      absl::StrCat("--fault_injection: unknown fault '", text,
                   "' (expected unit_order_reversed, unit_order_reversed_from=STEP or "
                   "never_join_rendezvous)"));
}

}  // namespace shardwise
