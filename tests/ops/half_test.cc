// fp16/bf16 conversions against naive references built from the format definitions.
#include "ops/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace arcreduce {
namespace {

// binary16 value from its definition: (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for e == 0.
double fp16_definition(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// For rounding checks +inf behaves like the next power of two after the largest finite value,
// which is exactly IEEE's overflow rule under round-to-nearest.
double fp16_magnitude_for_rounding(uint16_t h) {
  return (h & 0x7fff) == 0x7c00 ? 65536.0 : std::fabs(fp16_definition(h));
}
double bf16_magnitude_for_rounding(uint16_t b) {
  return (b & 0x7fff) == 0x7f80 ? std::ldexp(1.0, 128) : std::fabs(bf16_to_float(b));
}

// Checks that `h` (same sign as f) is a nearest representable value of |f| with ties to even.
template <typename Magnitude>
void expect_nearest_even(float f, uint16_t h, uint16_t max_finite, Magnitude magnitude) {
  const double x = std::fabs(static_cast<double>(f));
  const uint16_t m = h & 0x7fff;
  ASSERT_LE(m, max_finite + 1) << "f=" << f;
  const double err = std::fabs(x - magnitude(m));
  if (m > 0) {
    const double below = std::fabs(x - magnitude(m - 1));
    ASSERT_TRUE(err < below || (err == below && (m % 2) == 0)) << "f=" << f << " h=" << h;
  }
  if (m <= max_finite) {
    const double above = std::fabs(x - magnitude(m + 1));
    ASSERT_TRUE(err < above || (err == above && (m % 2) == 0)) << "f=" << f << " h=" << h;
  }
  ASSERT_EQ(h >> 15, std::signbit(f) ? 1 : 0) << "f=" << f;
}

TEST(Fp16Test, DecodesEveryPatternLikeTheDefinition) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const double expected = fp16_definition(static_cast<uint16_t>(h));
    const float got = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), expected) << h;
      ASSERT_EQ(std::signbit(got), (h >> 15) != 0) << h;
    }
  }
}

TEST(Fp16Test, RoundTripsEveryPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const uint16_t back = float_to_fp16(fp16_to_float(static_cast<uint16_t>(h)));
    const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
    if (nan) {
      // NaN stays NaN with its sign, quieted, payload kept.
      ASSERT_EQ(back & 0xfe00, (h & 0x8000) | 0x7e00) << h;
      ASSERT_EQ(back & 0x1ff, h & 0x1ff) << h;
    } else {
      ASSERT_EQ(back, h) << h;
    }
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(float_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(float_to_fp16(0.1f), 0x2e66);
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.996f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // tie with an odd mantissa: rounds up to inf
  EXPECT_EQ(float_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0001f, -25)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(-1.0001f, -25)), 0x8001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -30)), 0x0000);
  const uint16_t nan = float_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x3ff, 0);
}

TEST(Fp16Test, TiesRoundToEven) {
  // Normal range: 1 + 2^-11 lies halfway between 0x3c00 and 0x3c01.
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(float_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  // Subnormal range, in units of 2^-24: 1.5 -> 2, 2.5 -> 2, 3.5 -> 4.
  EXPECT_EQ(float_to_fp16(1.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(float_to_fp16(2.5f * std::ldexp(1.0f, -24)), 0x0002);
  EXPECT_EQ(float_to_fp16(3.5f * std::ldexp(1.0f, -24)), 0x0004);
  // Rounding up out of the subnormal range gives the smallest normal.
  EXPECT_EQ(float_to_fp16(1023.5f * std::ldexp(1.0f, -24)), 0x0400);
  // Rounding carries into the exponent.
  EXPECT_EQ(float_to_fp16(2047.0f / 1024.0f * 1.0f + std::ldexp(1.0f, -11)), 0x4000);
}

TEST(Fp16Test, RoundsEveryStridedFloatToNearestEven) {
  // Every 4099th fp32 pattern (about a million, covering all exponents) plus random ones.
  std::mt19937 rng(7);
  for (uint64_t i = 0; i < (uint64_t{1} << 32) + 2000000; i += 4099) {
    const uint32_t bits = i < (uint64_t{1} << 32) ? static_cast<uint32_t>(i) : rng();
    const float f = bits_float(bits);
    if (std::isnan(f)) continue;
    expect_nearest_even(f, float_to_fp16(f), 0x7bff, fp16_magnitude_for_rounding);
  }
}

TEST(Bf16Test, RoundTripsEveryPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const float f = bf16_to_float(static_cast<uint16_t>(b));
    EXPECT_EQ(float_bits(f), b << 16);
    const bool nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0;
    if (nan) {
      ASSERT_TRUE(std::isnan(bf16_to_float(float_to_bf16(f)))) << b;
    } else {
      ASSERT_EQ(float_to_bf16(f), b) << b;
    }
  }
}

TEST(Bf16Test, KnownValuesAndTies) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits_float(0x7f7fffffu)), 0x7f80);  // overflow to inf
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16(bits_float(0x00018000u)), 0x0002);    // subnormal tie, odd rounds up
  const uint16_t nan = float_to_bf16(bits_float(0x7f800001u));  // signalling NaN, low payload
  EXPECT_TRUE(std::isnan(bf16_to_float(nan)));
}

TEST(Bf16Test, RoundsEveryStridedFloatToNearestEven) {
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += 4099) {
    const float f = bits_float(static_cast<uint32_t>(i));
    if (std::isnan(f)) continue;
    expect_nearest_even(f, float_to_bf16(f), 0x7f7f, bf16_magnitude_for_rounding);
  }
}

}  // namespace
}  // namespace arcreduce
