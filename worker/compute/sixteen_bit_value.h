#ifndef SHARDWISE_WORKER_COMPUTE_SIXTEEN_BIT_VALUE_H_
#define SHARDWISE_WORKER_COMPUTE_SIXTEEN_BIT_VALUE_H_

// Tests only: a BF16 or FP16 value as a GPU job's 16-bit storage keeps it, for the host/
// device row routines (fused_attention_rows.h, norm_rows.h) run on the host over 16-bit
// values: its bits, converted to float exactly as a kernel widens them (casts.h's Widen),
// as CUDA's __nv_bfloat16 and __half convert.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "worker/compute/casts.h"
#include "worker/runtime/scalar_type.h"

namespace shardwise::testing {

template <ScalarType kType>
struct SixteenBitValue {
  uint16_t bits;
  explicit operator float() const {
    float value = 0;
    cpu::Widen(kType, &bits, &value, 1);
    return value;
  }
};

// `values` (already 16-bit values) stored as kType.
template <ScalarType kType>
std::vector<SixteenBitValue<kType>> StoredSixteenBit(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  cpu::Narrow(kType, values.data(), bits.data(), values.size());
  std::vector<SixteenBitValue<kType>> stored(values.size());
  for (size_t i = 0; i < values.size(); ++i) stored[i].bits = bits[i];
  return stored;
}

}  // namespace shardwise::testing

#endif  // SHARDWISE_WORKER_COMPUTE_SIXTEEN_BIT_VALUE_H_
