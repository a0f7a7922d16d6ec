#ifndef SHARDWISE_COMMON_TESTING_WORST_ERROR_H_
#define SHARDWISE_COMMON_TESTING_WORST_ERROR_H_

// The running worst of a test's errors, a NaN counted as the worst there is. Neither
// std::max(worst, NaN) nor `NaN > worst` replaces `worst`, so a result gone NaN would
// pass every bound a test holds it to.

#include <cmath>
#include <limits>

namespace shardwise::testing {

// The larger of `worst` and `error`; +infinity from the first NaN `error` on.
inline double WorseOf(double worst, double error) {
  if (std::isnan(error)) return std::numeric_limits<double>::infinity();
  return error > worst ? error : worst;
}

}  // namespace shardwise::testing

#endif  // SHARDWISE_COMMON_TESTING_WORST_ERROR_H_
