#ifndef SHARDWISE_CONTRACTS_VALIDATION_LOSS_TEXT_H_
#define SHARDWISE_CONTRACTS_VALIDATION_LOSS_TEXT_H_

// How a job's validation loss reads in its summaries (the worker's result line and the
// CLI's), written once: "5.5000 -> 2.2500" from the first evaluation of the attempt to
// the latest, or "1.8719 after step 1000" when the attempt evaluated once, where an arrow
// from a loss to itself would suggest two evaluations that agreed.

#include <cstdint>
#include <string>

namespace shardwise {

// `first_step` and `last_step`: the steps completed when each loss was measured.
std::string ValidationLossText(double first, int64_t first_step, double last, int64_t last_step);

}  // namespace shardwise

#endif  // SHARDWISE_CONTRACTS_VALIDATION_LOSS_TEXT_H_
