#ifndef SHARDWISE_WORKER_COMPUTE_CASTS_H_
#define SHARDWISE_WORKER_COMPUTE_CASTS_H_

// FP32 <-> FP16 and FP32 <-> BF16 conversions, rounding to nearest even, as PyTorch's
// .to(torch.float16) / .to(torch.bfloat16) do: NaN stays NaN (quiet), +-inf stays inf,
// values too large for FP16 become inf, tiny values become subnormals or zero. The
// widening direction is exact. The array versions use F16C and AVX2 where the processor
// has them (chosen at run time) and a portable loop elsewhere; both give the same bits.

#include <cstddef>
#include <cstdint>

#include "worker/runtime/scalar_type.h"

namespace shardwise::cpu {

uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

void FloatToHalf(const float* in, uint16_t* out, size_t n);
void HalfToFloat(const uint16_t* in, float* out, size_t n);
void FloatToBFloat16(const float* in, uint16_t* out, size_t n);
void BFloat16ToFloat(const uint16_t* in, float* out, size_t n);

// By element type (FP16 or BF16; FP32 copies or does nothing):
// FP32 -> the type's 16-bit storage, and back.
void Narrow(ScalarType type, const float* in, uint16_t* out, size_t n);
void Widen(ScalarType type, const uint16_t* in, float* out, size_t n);
// Rounds FP32 values in place to the nearest value the type can hold (mixed precision's
// "compute in param_dtype" on CPU: operands rounded, arithmetic in FP32).
void RoundToPrecision(ScalarType type, float* data, size_t n);

// The two implementations behind the array versions, for tests and benchmarks.
namespace internal {
bool HasVectorCasts();  // F16C and AVX2
void FloatToHalfPortable(const float* in, uint16_t* out, size_t n);
void HalfToFloatPortable(const uint16_t* in, float* out, size_t n);
void FloatToBFloat16Portable(const float* in, uint16_t* out, size_t n);
void BFloat16ToFloatPortable(const uint16_t* in, float* out, size_t n);
// Only where HasVectorCasts().
void FloatToHalfVector(const float* in, uint16_t* out, size_t n);
void HalfToFloatVector(const uint16_t* in, float* out, size_t n);
void FloatToBFloat16Vector(const float* in, uint16_t* out, size_t n);
void BFloat16ToFloatVector(const uint16_t* in, float* out, size_t n);
}  // namespace internal

}  // namespace shardwise::cpu

#endif  // SHARDWISE_WORKER_COMPUTE_CASTS_H_
