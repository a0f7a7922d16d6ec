#ifndef SHARDWISE_WORKER_COMPUTE_CASTS_H_
#define SHARDWISE_WORKER_COMPUTE_CASTS_H_

// FP32 <-> FP16 and FP32 <-> BF16 conversions, rounding to nearest even, as PyTorch's
// .to(torch.float16) / .to(torch.bfloat16) do: NaN stays NaN (quiet), +-inf stays inf,
// values too large for FP16 become inf, tiny values become subnormals or zero. The
// widening direction is exact. Scalar code; the vectorised paths come with mixed precision.

#include <cstddef>
#include <cstdint>

namespace shardwise::cpu {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

void FloatToHalf(const float* in, uint16_t* out, size_t n);
void HalfToFloat(const uint16_t* in, float* out, size_t n);
void FloatToBFloat16(const float* in, uint16_t* out, size_t n);
void BFloat16ToFloat(const uint16_t* in, float* out, size_t n);

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CASTS_H_
