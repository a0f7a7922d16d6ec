#include "worker/compute/casts.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

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

namespace internal {

void FloatToHalfPortable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(in[i]);
}
void HalfToFloatPortable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = HalfToFloat(in[i]);
}
void FloatToBFloat16Portable(const float* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}
void BFloat16ToFloatPortable(const uint16_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

#if defined(__x86_64__)

bool HasVectorCasts() {
  // F16C is read from CPUID leaf 1 directly: clang does not name it in
  // __builtin_cpu_supports (GCC does), and the fuzz build uses clang.
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return f16c && __builtin_cpu_supports("avx2");
  }();
  return has;
}

// Eight lanes at a time; the tails go through the scalar code, which rounds the same way.
__attribute__((target("avx2,f16c"))) void FloatToHalfVector(const float* in, uint16_t* out,
                                                            size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(in + i);
    // F16C rounds to nearest even, overflows to inf and keeps NaN a NaN, like FloatToHalf;
    // only a NaN's payload may differ, so NaNs are made the same quiet NaN.
    __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 is_nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const int nan_mask = _mm256_movemask_ps(is_nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    if (nan_mask != 0) {
      for (int lane = 0; lane < 8; ++lane) {
        if (nan_mask & (1 << lane)) out[i + lane] = FloatToHalf(in[i + lane]);
      }
    }
  }
  for (; i < n; ++i) out[i] = FloatToHalf(in[i]);
}

__attribute__((target("avx2,f16c"))) void HalfToFloatVector(const uint16_t* in, float* out,
                                                            size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) out[i] = HalfToFloat(in[i]);
}

__attribute__((target("avx2"))) void FloatToBFloat16Vector(const float* in, uint16_t* out,
                                                           size_t n) {
  const __m256i round_base = _mm256_set1_epi32(0x7fff);
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    // Round to nearest even: add 0x7fff plus the lowest kept bit, then drop 16 bits.
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i rounded = _mm256_add_epi32(x, _mm256_add_epi32(round_base, odd));
    // NaN: keep the sign and top payload bits, and make it quiet (as FloatToBFloat16).
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), inf);
    rounded = _mm256_blendv_epi8(rounded, _mm256_or_si256(x, quiet), nan);
    const __m256i shifted = _mm256_srli_epi32(rounded, 16);
    // Pack 32 -> 16 bits; packus works per 128-bit lane, so put the halves back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(shifted, shifted), 0xd8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_castsi256_si128(packed));
  }
  for (; i < n; ++i) out[i] = FloatToBFloat16(in[i]);
}

__attribute__((target("avx2"))) void BFloat16ToFloatVector(const uint16_t* in, float* out,
                                                           size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    const __m256i widened = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), widened);
  }
  for (; i < n; ++i) out[i] = BFloat16ToFloat(in[i]);
}

#else  // not x86-64: the portable loops serve

bool HasVectorCasts() { return false; }
void FloatToHalfVector(const float* in, uint16_t* out, size_t n) {
  FloatToHalfPortable(in, out, n);
}
void HalfToFloatVector(const uint16_t* in, float* out, size_t n) {
  HalfToFloatPortable(in, out, n);
}
void FloatToBFloat16Vector(const float* in, uint16_t* out, size_t n) {
  FloatToBFloat16Portable(in, out, n);
}
void BFloat16ToFloatVector(const uint16_t* in, float* out, size_t n) {
  BFloat16ToFloatPortable(in, out, n);
}

#endif

}  // namespace internal

void FloatToHalf(const float* in, uint16_t* out, size_t n) {
  internal::HasVectorCasts() ? internal::FloatToHalfVector(in, out, n)
                             : internal::FloatToHalfPortable(in, out, n);
}
void HalfToFloat(const uint16_t* in, float* out, size_t n) {
  internal::HasVectorCasts() ? internal::HalfToFloatVector(in, out, n)
                             : internal::HalfToFloatPortable(in, out, n);
}
void FloatToBFloat16(const float* in, uint16_t* out, size_t n) {
  internal::HasVectorCasts() ? internal::FloatToBFloat16Vector(in, out, n)
                             : internal::FloatToBFloat16Portable(in, out, n);
}
void BFloat16ToFloat(const uint16_t* in, float* out, size_t n) {
  internal::HasVectorCasts() ? internal::BFloat16ToFloatVector(in, out, n)
                             : internal::BFloat16ToFloatPortable(in, out, n);
}

void Narrow(ScalarType type, const float* in, uint16_t* out, size_t n) {
  if (type == ScalarType::kFloat16) {
    FloatToHalf(in, out, n);
  } else {
    FloatToBFloat16(in, out, n);
  }
}

void Widen(ScalarType type, const uint16_t* in, float* out, size_t n) {
  if (type == ScalarType::kFloat16) {
    HalfToFloat(in, out, n);
  } else {
    BFloat16ToFloat(in, out, n);
  }
}

void RoundToPrecision(ScalarType type, float* data, size_t n) {
  if (type != ScalarType::kFloat16 && type != ScalarType::kBFloat16) return;
  constexpr size_t kBlock = 2048;  // through a small stack buffer, block by block
  uint16_t narrow[kBlock];
  for (size_t i = 0; i < n; i += kBlock) {
    const size_t m = std::min(kBlock, n - i);
    Narrow(type, data + i, narrow, m);
    Widen(type, narrow, data + i, m);
  }
}

}  // namespace shardwise::cpu
