#include "worker/compute/casts.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/base/casts.h"
#include "gtest/gtest.h"

namespace shardwise::cpu {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);   // largest finite
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);  // just below the halfway point
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);   // halfway: to even, which is inf
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);       // overflow is inf
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::nanf("")) & 0x7e00, 0x7e00);  // quiet NaN
  EXPECT_EQ(FloatToHalf(6.103515625e-05f), 0x0400);        // smallest normal, 2^-14
  EXPECT_EQ(FloatToHalf(5.9604645e-08f), 0x0001);          // smallest subnormal, 2^-24
  EXPECT_EQ(FloatToHalf(2.98023224e-08f), 0x0000);         // 2^-25: a tie, to even (zero)
  EXPECT_EQ(FloatToHalf(8.94069672e-08f), 0x0002);         // 1.5 * 2^-24: a tie, to even (2)
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);      // tie below: to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);      // tie above: to even
  EXPECT_EQ(FloatToHalf(0.333333343f), 0x3555);
}

TEST(Half, EveryHalfRoundTripsExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, RoundsToNearestAgainstADoubleReference) {
  // Every FP32 between consecutive FP16 values must go to the nearer one (even on ties):
  // checked on a sweep of FP32 bit patterns across FP16's finite range (up to 65520, where
  // rounding overflows to inf; KnownBitPatterns covers that).
  for (uint32_t bits = 0x33000000; bits < 0x477ff000; bits += 0x1fff) {
    const float f = FromBits(bits);
    const uint16_t h = FloatToHalf(f);
    const double got = HalfToFloat(h);
    const double below = HalfToFloat(static_cast<uint16_t>(h - (h > 0 ? 1 : 0)));
    const double above = HalfToFloat(static_cast<uint16_t>(h + 1));
    EXPECT_LE(std::abs(got - f), std::abs(below - f)) << f;
    EXPECT_LE(std::abs(got - f), std::abs(above - f)) << f;
  }
}

TEST(BFloat16, KnownBitPatterns) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-1.0f), 0xbf80);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808000)), 0x3f80);               // tie, even below
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f818000)), 0x3f82);               // tie, even above
  EXPECT_EQ(FloatToBFloat16(FromBits(0x3f808001)), 0x3f81);               // above the tie
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00000001)), 0x0000);  // FP32 subnormal, tiny
  EXPECT_EQ(FloatToBFloat16(FromBits(0x00018000)), 0x0002);  // subnormals round too
  const uint16_t nan = FloatToBFloat16(std::nanf(""));
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
}

TEST(BFloat16, EveryBFloat16RoundTripsExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(f)))) << b;
      continue;
    }
    ASSERT_EQ(FloatToBFloat16(f), b) << "bf16 0x" << std::hex << b;
  }
}

}  // namespace
}  // namespace shardwise::cpu

namespace shardwise::cpu {
namespace {

// Inputs that exercise every rounding case: specials, both sides of the FP16 range and
// its halfway point, subnormals of both formats, ties, and a sweep of bit patterns.
std::vector<float> CastInputs() {
  std::vector<float> in = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           65504.0f,
                           65519.99f,
                           65520.0f,
                           1e6f,
                           -1e6f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::nanf(""),
                           -std::nanf(""),
                           5.9604645e-08f,
                           2.98023224e-08f,
                           8.94069672e-08f,
                           6.103515625e-05f,
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min()};
  for (uint32_t bits = 0; bits < 0xffffffffu - 0x7ffff; bits += 0x7ffff)
    in.push_back(FromBits(bits));
  in.push_back(FromBits(0x7fa00001));  // a signalling NaN
  return in;
}

void ExpectSameBits(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b, bool half) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const bool nan = half ? std::isnan(HalfToFloat(a[i])) : std::isnan(BFloat16ToFloat(a[i]));
    if (nan) {
      EXPECT_TRUE(half ? std::isnan(HalfToFloat(b[i])) : std::isnan(BFloat16ToFloat(b[i]))) << i;
    } else {
      ASSERT_EQ(a[i], b[i]) << "element " << i;
    }
  }
}

TEST(VectorCasts, NarrowingMatchesThePortablePath) {
  if (!internal::HasVectorCasts()) GTEST_SKIP() << "this processor lacks F16C/AVX2";
  const std::vector<float> in = CastInputs();  // not a multiple of 8: tails are exercised
  std::vector<uint16_t> portable(in.size()), vector(in.size());
  internal::FloatToHalfPortable(in.data(), portable.data(), in.size());
  internal::FloatToHalfVector(in.data(), vector.data(), in.size());
  ExpectSameBits(portable, vector, /*half=*/true);
  internal::FloatToBFloat16Portable(in.data(), portable.data(), in.size());
  internal::FloatToBFloat16Vector(in.data(), vector.data(), in.size());
  ExpectSameBits(portable, vector, /*half=*/false);
}

TEST(VectorCasts, WideningMatchesForEveryPattern) {
  if (!internal::HasVectorCasts()) GTEST_SKIP() << "this processor lacks F16C/AVX2";
  std::vector<uint16_t> all(65536 + 5);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> portable(all.size()), vector(all.size());
  for (bool half : {true, false}) {
    if (half) {
      internal::HalfToFloatPortable(all.data(), portable.data(), all.size());
      internal::HalfToFloatVector(all.data(), vector.data(), all.size());
    } else {
      internal::BFloat16ToFloatPortable(all.data(), portable.data(), all.size());
      internal::BFloat16ToFloatVector(all.data(), vector.data(), all.size());
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::isnan(portable[i])) {
        EXPECT_TRUE(std::isnan(vector[i])) << i;
      } else {
        ASSERT_EQ(absl::bit_cast<uint32_t>(portable[i]), absl::bit_cast<uint32_t>(vector[i]))
            << (half ? "half " : "bf16 ") << i;
      }
    }
  }
}

TEST(VectorCasts, TheDispatchedFunctionsUseOneOfThePaths) {
  const float in[3] = {1.5f, -2.25f, 65520.0f};
  uint16_t out[3];
  FloatToHalf(in, out, 3);
  EXPECT_EQ(out[0], FloatToHalf(1.5f));
  EXPECT_EQ(out[2], 0x7c00);
}

}  // namespace
}  // namespace shardwise::cpu
