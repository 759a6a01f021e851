// portable_math.h against double-precision libm: every input Box-Muller can receive
// (u = j * 2^-24), random floats of the documented domains and the edge cases. The ulp bounds
// asserted here are the measured maxima (0.83 and 1.24 ulp) rounded up; the measured values
// are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/kernels/philox.h"
#include "compressors/kernels/portable_math.h"

namespace arcreduce {
namespace kernels {
namespace {

constexpr double kLogBoundUlp = 1.0;
constexpr double kSinCosBoundUlp = 1.5;
constexpr float kTwoPow24Inv = 5.9604644775390625e-8f;  // 2^-24
constexpr double kHalfPi = 1.57079632679489661923;

// The spacing of floats at float(ref) (normal range, which every reference here is in).
double ulp_of(double ref) {
  int exponent = 0;
  std::frexp(std::fabs(static_cast<double>(static_cast<float>(ref))), &exponent);
  return std::ldexp(1.0, exponent - 24);
}

// Error of `got` in ulps of the reference; an exact zero must be met exactly.
double ulp_error(float got, double ref) {
  if (ref == 0.0) return got == 0.0f ? 0.0 : HUGE_VAL;
  return std::fabs(static_cast<double>(got) - ref) / ulp_of(ref);
}

// sin and cos of 2 pi u in double, reduced exactly: 4u = q + x with x in [-1/2, 1/2] is exact in
// double, so the only error is that of double sin/cos of x pi/2 (about 1e-16, relative), and
// the zeros at multiples of a quarter turn are exact.
void reference_sincos(float u, double* s, double* c) {
  const double t = 4.0 * static_cast<double>(u);
  const double q = std::nearbyint(t);
  const double x = t - q;
  const double sx = std::sin(x * kHalfPi), cx = std::cos(x * kHalfPi);
  switch (static_cast<int>(q) & 3) {
    case 0:
      *s = sx, *c = cx;
      break;
    case 1:
      *s = cx, *c = -sx;
      break;
    case 2:
      *s = -sx, *c = -cx;
      break;
    default:
      *s = -cx, *c = sx;
      break;
  }
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

struct MaxError {
  double ulps = 0.0;
  float at = 0.0f;
  void add(double e, float u) {
    if (e > ulps) ulps = e, at = u;
  }
};

TEST(PortableLog, EveryBoxMullerInputWithinBound) {
  MaxError worst;
  for (uint32_t j = 1; j <= (1u << 24); ++j) {
    const float u = static_cast<float>(j) * kTwoPow24Inv;
    worst.add(ulp_error(portable_log(u), std::log(static_cast<double>(u))), u);
  }
  std::printf("portable_log, u = j * 2^-24: max %.3f ulp at u = %.9g\n", worst.ulps, worst.at);
  EXPECT_LE(worst.ulps, kLogBoundUlp) << "at u = " << worst.at;
}

TEST(PortableLog, RandomNormalFloatsWithinBound) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<uint32_t> bits(0x00800000u, 0x3F800000u);  // normal, (0, 1]
  MaxError worst;
  for (int i = 0; i < 4000000; ++i) {
    const float u = from_bits(bits(gen));
    worst.add(ulp_error(portable_log(u), std::log(static_cast<double>(u))), u);
  }
  std::printf("portable_log, random normal floats: max %.3f ulp at u = %.9g\n", worst.ulps,
              worst.at);
  EXPECT_LE(worst.ulps, kLogBoundUlp) << "at u = " << worst.at;
}

TEST(PortableLog, EdgeCases) {
  EXPECT_EQ(portable_log(1.0f), 0.0f);
  EXPECT_EQ(portable_log(0.5f), static_cast<float>(-std::log(2.0)));
  EXPECT_EQ(portable_log(kTwoPow24Inv), static_cast<float>(-24.0 * std::log(2.0)));
  // Around the reduction's switch at sqrt(1/2) (mantissa 0x3504F3), the smallest normal float
  // and the float below 1.
  const uint32_t cases[] = {0x3F3504F1u, 0x3F3504F2u, 0x3F3504F3u, 0x3F3504F4u, 0x3EB504F3u,
                            0x3EB504F2u, 0x00800000u, 0x00800001u, 0x3F7FFFFFu};
  for (uint32_t b : cases) {
    const float u = from_bits(b);
    EXPECT_LE(ulp_error(portable_log(u), std::log(static_cast<double>(u))), kLogBoundUlp)
        << "u = " << u;
  }
}

TEST(PortableSinCos, EveryBoxMullerInputWithinBound) {
  MaxError worst_sin, worst_cos;
  for (uint32_t j = 0; j < (1u << 24); ++j) {
    const float u = static_cast<float>(j) * kTwoPow24Inv;
    float s = 0.0f, c = 0.0f;
    portable_sincos_2pi(u, &s, &c);
    double rs = 0.0, rc = 0.0;
    reference_sincos(u, &rs, &rc);
    worst_sin.add(ulp_error(s, rs), u);
    worst_cos.add(ulp_error(c, rc), u);
  }
  std::printf(
      "portable_sincos_2pi, u = j * 2^-24: sin max %.3f ulp at u = %.9g, cos max %.3f ulp "
      "at u = %.9g\n",
      worst_sin.ulps, worst_sin.at, worst_cos.ulps, worst_cos.at);
  EXPECT_LE(worst_sin.ulps, kSinCosBoundUlp) << "sin at u = " << worst_sin.at;
  EXPECT_LE(worst_cos.ulps, kSinCosBoundUlp) << "cos at u = " << worst_cos.at;
}

TEST(PortableSinCos, RandomFloatsWithinBound) {
  std::mt19937 gen(12);
  std::uniform_int_distribution<uint32_t> bits(0x00800000u, 0x3F7FFFFFu);  // normal, (0, 1)
  MaxError worst_sin, worst_cos;
  for (int i = 0; i < 4000000; ++i) {
    const float u = from_bits(bits(gen));
    float s = 0.0f, c = 0.0f;
    portable_sincos_2pi(u, &s, &c);
    double rs = 0.0, rc = 0.0;
    reference_sincos(u, &rs, &rc);
    worst_sin.add(ulp_error(s, rs), u);
    worst_cos.add(ulp_error(c, rc), u);
  }
  std::printf("portable_sincos_2pi, random floats: sin max %.3f ulp, cos max %.3f ulp\n",
              worst_sin.ulps, worst_cos.ulps);
  EXPECT_LE(worst_sin.ulps, kSinCosBoundUlp) << "sin at u = " << worst_sin.at;
  EXPECT_LE(worst_cos.ulps, kSinCosBoundUlp) << "cos at u = " << worst_cos.at;
}

TEST(PortableSinCos, QuarterTurnsAreExactAndBoundariesAccurate) {
  const float exact[][3] = {
      {0.0f, 0.0f, 1.0f}, {0.25f, 1.0f, 0.0f}, {0.5f, 0.0f, -1.0f}, {0.75f, -1.0f, 0.0f}};
  for (const auto& e : exact) {
    float s = NAN, c = NAN;
    portable_sincos_2pi(e[0], &s, &c);
    EXPECT_EQ(s, e[1]) << "u = " << e[0];
    EXPECT_EQ(c, e[2]) << "u = " << e[0];
  }
  // Where the nearest quadrant switches (4u = q + 1/2) and next to the quarter turns, one and
  // two float steps either side, and the largest input.
  std::vector<float> cases;
  for (float center : {0.125f, 0.375f, 0.625f, 0.875f, 0.25f, 0.5f, 0.75f}) {
    float below = center, above = center;
    for (int step = 0; step < 2; ++step) {
      below = std::nextafter(below, 0.0f);
      above = std::nextafter(above, 1.0f);
      cases.push_back(below);
      cases.push_back(above);
    }
    cases.push_back(center);
  }
  cases.push_back(1.0f - kTwoPow24Inv);
  cases.push_back(std::nextafter(1.0f, 0.0f));
  cases.push_back(kTwoPow24Inv);
  for (float u : cases) {
    float s = 0.0f, c = 0.0f;
    portable_sincos_2pi(u, &s, &c);
    double rs = 0.0, rc = 0.0;
    reference_sincos(u, &rs, &rc);
    EXPECT_LE(ulp_error(s, rs), kSinCosBoundUlp) << "sin at u = " << u;
    EXPECT_LE(ulp_error(c, rc), kSinCosBoundUlp) << "cos at u = " << u;
  }
}

// fill_gaussian is Box-Muller over the portable functions, nothing else (in particular no libm):
// recomputed here from the Philox words, element for element and bit for bit.
TEST(FillGaussian, IsBoxMullerOfThePortableFunctions) {
  const uint64_t key = philox_key(5, "portable", 2);
  constexpr size_t kN = 4099;
  std::vector<float> z(kN);
  fill_gaussian(key, z.data(), kN);
  for (size_t i = 0; i < kN; ++i) {
    const Philox4x32 bits = philox_block(key, kDomainGaussian, i / 4);
    const size_t pair = (i % 4) / 2;
    const uint32_t a = bits.v[2 * pair], b = bits.v[2 * pair + 1];
    const float u0 = static_cast<float>((a >> 8) + 1u) * kTwoPow24Inv;
    const float u1 = static_cast<float>(b >> 8) * kTwoPow24Inv;
    const float radius = std::sqrt(-2.0f * portable_log(u0));
    float s = 0.0f, c = 0.0f;
    portable_sincos_2pi(u1, &s, &c);
    const float expected = radius * (i % 2 == 0 ? c : s);
    ASSERT_EQ(z[i], expected) << "i = " << i;
  }
}

}  // namespace
}  // namespace kernels
}  // namespace arcreduce
