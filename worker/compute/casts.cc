#include "worker/compute/casts.h"

#include <cstring>

namespace shardwise::cpu {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

uint16_t FloatToHalf(float value) {
  uint32_t x = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x >= 0x7f800000) {  // inf stays inf; NaN becomes a quiet NaN
    return sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00);
  }
  // 65520 is halfway between FP16's largest finite value (65504) and the next step
  // (65536, beyond range): from there on everything rounds to inf.
  if (x >= 0x477ff000) return sign | 0x7c00;
  if (x < 0x38800000) {
    // Below FP16's smallest normal (2^-14): the result is subnormal or zero, a multiple of
    // 2^-24. Adding 0.5 (whose ULP in FP32 is 2^-24) makes the FPU round to that grid,
    // to nearest even; the low mantissa bits are then the FP16 subnormal.
    const float rounded = FromBits(x) + 0.5f;
    return sign | static_cast<uint16_t>(Bits(rounded) - 0x3f000000);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest
  // even; a carry out of the mantissa correctly bumps the exponent.
  const uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd;
  return sign | static_cast<uint16_t>(x >> 13);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in FP32.
    return FromBits(sign | Bits(static_cast<float>(mantissa) * 5.9604644775390625e-8f));
  }
  if (exponent == 31) return FromBits(sign | 0x7f800000 | (mantissa << 13));  // inf, NaN
  return FromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToBFloat16(float value) {
  const uint32_t x = Bits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x0040);  // quiet NaN
  // Round the 16 dropped bits to nearest even; overflow carries into inf, as it should.
  const uint32_t odd = (x >> 16) & 1;
  return static_cast<uint16_t>((x + 0x7fff + odd) >> 16);
}

float BFloat16ToFloat(uint16_t bits) { return FromBits(static_cast<uint32_t>(bits) << 16); }

void FloatToHalf(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
void HalfToFloat(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}
void FloatToBFloat16(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}
void BFloat16ToFloat(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

}  // namespace shardwise::cpu
