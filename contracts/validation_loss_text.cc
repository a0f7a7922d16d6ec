#include "contracts/validation_loss_text.h"

#include "absl/strings/str_format.h"

namespace shardwise {

std::string ValidationLossText(double first, int64_t first_step, double last, int64_t last_step) {
  if (first_step == last_step) return absl::StrFormat("%.4f after step %d", last, last_step);
  return absl::StrFormat("%.4f -> %.4f", first, last);
}

}  // namespace shardwise
