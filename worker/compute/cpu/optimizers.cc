#include "worker/compute/cpu/optimizers.h"

#include "worker/compute/cpu/vector_clones.h"
#include "worker/compute/pointwise.h"

namespace shardwise::cpu {

// Cloned for the widest vectors the CPU has (vector_clones.h).
SHARDWISE_VECTOR_CLONES void SgdUpdate(const SgdScalars& s, bool first, float* param,
                                       const float* grad, float* momentum, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    pointwise::SgdStep(s, first, param + i, grad[i], momentum != nullptr ? momentum + i : nullptr);
  }
}

SHARDWISE_VECTOR_CLONES void AdamWUpdate(const AdamWScalars& s, float* param, const float* grad,
                                         float* exp_avg, float* exp_avg_sq, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    pointwise::AdamWStep(s, param + i, grad[i], exp_avg + i, exp_avg_sq + i);
  }
}

}  // namespace shardwise::cpu
