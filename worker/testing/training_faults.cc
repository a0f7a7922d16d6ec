#include "worker/testing/training_faults.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace shardwise {

absl::StatusOr<TrainingFaults> ParseTrainingFaults(const std::string& text) {
  TrainingFaults faults;
  if (text.empty()) return faults;
  int64_t from = 0;
  absl::string_view rest = text;
  if (text != "unit_order_reversed" &&
      !(absl::ConsumePrefix(&rest, "unit_order_reversed_from=") && absl::SimpleAtoi(rest, &from))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--fault_injection: unknown fault '", text,
        "' (expected unit_order_reversed or unit_order_reversed_from=STEP)"));
  }
  faults.alter_execution_order = [from](int64_t step, v1::ExecutionOrder* order) {
    if (step < from) return;
    std::reverse(order->mutable_pre_forward()->begin(), order->mutable_pre_forward()->end());
    std::reverse(order->mutable_post_forward()->begin(), order->mutable_post_forward()->end());
  };
  return faults;
}

}  // namespace shardwise
