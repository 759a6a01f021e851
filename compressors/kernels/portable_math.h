// Float functions with one numerical definition on the host (g++) and the device (nvcc): the
// natural logarithm and the sine and cosine of a full turn times u, which is what Box-Muller
// (philox.h) needs. libm's logf/cosf/sinf differ between glibc and CUDA, so the Gaussian
// projection built from them would differ between the CPU and CUDA builds of the kernels.
//
// Contract: every result is computed with IEEE-754 binary32 +, -, *, / and sqrt in round to
// nearest, each rounded on its own, in a fixed order, plus exact bit manipulation. Those
// operations are correctly rounded on both sides, so the results are bit-identical between the
// builds. What that needs from the compilers:
//   - Device: the arithmetic goes through __fadd_rn/__fsub_rn/__fmul_rn/__fdiv_rn/__fsqrt_rn,
//     which nvcc never contracts into FMA and which stay IEEE-exact whatever -prec-div,
//     -prec-sqrt or -use_fast_math say. No operation produces a subnormal in portable_log on
//     its domain or in portable_sincos_2pi on the inputs Box-Muller gives it (multiples of
//     2^-24), so -ftz does not change those results either.
//   - Host: plain operators. The CPU build of the kernels (kernels_cpu.cc) is compiled without
//     -mfma, so x86-64 has no fused multiply-add to contract into, and cmake/kernels.cmake adds
//     -ffp-contract=off to it as a guard for targets (aarch64) whose base ISA has one. Do not
//     call these functions from a translation unit built with contraction on and FMA enabled
//     (kernels_cpu_avx2.cc): it would compute other values. x86-64 evaluates float in SSE
//     registers (FLT_EVAL_METHOD 0), so there is no excess precision.
//
// Accuracy against double-precision references, measured over every input Box-Muller can
// receive (u = j * 2^-24; random floats of the domains stay below these maxima)
// (tests/kernels/portable_math_test.cc asserts the bounds in brackets):
//   portable_log(u), u in (0, 1]:          max 0.83 ulp of the double result   [1 ulp]
//   portable_sincos_2pi(u), u in [0, 1):   max 1.24 ulp for sine and cosine    [1.5 ulp]
// Exact zeros (sin/cos at multiples of a quarter turn, log(1)) come out as exact zeros.
#pragma once

#include <math.h>  // sqrtf

#include <cstdint>

#include "ops/half.h"  // ARC_HOST_DEVICE, float_bits, bits_float

namespace arcreduce {
namespace kernels {
namespace portable {

// One IEEE operation each, rounded to nearest, never fused with a neighbour.
ARC_HOST_DEVICE inline float add_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
ARC_HOST_DEVICE inline float sub_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
ARC_HOST_DEVICE inline float mul_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
ARC_HOST_DEVICE inline float div_rn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
ARC_HOST_DEVICE inline float sqrt_rn(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return sqrtf(a);  // correctly rounded (IEEE-754 requires it; x86-64 uses sqrtss)
#endif
}

}  // namespace portable

// ln(u) for a normal float u in (0, 1] (every uniform_open0 value is one). Outside that domain
// the result is unspecified.
//
// u = 2^k * m with m in [sqrt(1/2), sqrt(2)) taken from the bits (exact). With f = m - 1 (exact:
// Sterbenz) and s = f / (2 + f), ln(m) = 2 atanh(s) = f - f^2/2 + s * (f^2/2 + R(s^2)) where
// R(z) = 2/3 z + 2/5 z^2 + ... (the odd atanh series after its first term; |s| < 0.1716 so five
// terms leave a truncation error below 1e-9 of ln(m)). Writing it around the exact f keeps the
// large part exact; s only enters the small correction. k * ln 2 is added as k * ln2_hi (exact:
// ln2_hi has 16 significant bits and |k| <= 126) plus k * ln2_lo.
ARC_HOST_DEVICE inline float portable_log(float u) {
  using namespace portable;
  uint32_t bits = float_bits(u);
  int k = static_cast<int>(bits >> 23) - 127;
  bits &= 0x007FFFFFu;
  // Mantissa bits of sqrt(2) rounded to float (0x3FB504F3): from there on take m / 2, i.e.
  // exponent -1 (m in [sqrt(2)/2, 1)) instead of 0 (m in [1, sqrt(2))). Branch-free: the
  // choice is random for random inputs.
  const uint32_t half = bits >= 0x003504F3u ? 1u : 0u;
  bits |= 0x3F800000u - (half << 23);
  k += static_cast<int>(half);
  const float m = bits_float(bits);
  const float f = sub_rn(m, 1.0f);
  const float s = div_rn(f, add_rn(2.0f, f));
  const float z = mul_rn(s, s);
  // 2/3, 2/5, 2/7, 2/9, 2/11 rounded to float.
  float r = 0x1.745d18p-3f;
  r = add_rn(0x1.c71c72p-3f, mul_rn(z, r));
  r = add_rn(0x1.24924ap-2f, mul_rn(z, r));
  r = add_rn(0x1.99999ap-2f, mul_rn(z, r));
  r = add_rn(0x1.555556p-1f, mul_rn(z, r));
  r = mul_rn(z, r);
  const float hfsq = mul_rn(mul_rn(0.5f, f), f);
  const float kf = static_cast<float>(k);  // exact
  const float ln2_hi = 0x1.62e4p-1f;       // 0.693145751953125
  const float ln2_lo = 0x1.7f7d1cp-20f;    // ln 2 - ln2_hi, rounded to float
  const float tail = add_rn(mul_rn(s, add_rn(hfsq, r)), mul_rn(kf, ln2_lo));
  return add_rn(mul_rn(kf, ln2_hi), sub_rn(f, sub_rn(hfsq, tail)));
}

// sin(2 pi u) and cos(2 pi u) for u in [0, 1) (every uniform_open1 value).
//
// The reduction is exact and done on u, not on an angle: t = 4u is exact, t = q + x with q the
// nearest integer (the quadrant) and x in [-1/2, 1/2] exact, so 2 pi u = q pi/2 + x pi/2. Then
// sin(x pi/2) and cos(x pi/2) are Taylor polynomials in x (|x pi/2| <= pi/4; truncation below
// 3e-9 relative) whose coefficients carry the powers of pi/2, and the quadrant swaps and negates
// them.
ARC_HOST_DEVICE inline void portable_sincos_2pi(float u, float* sin_out, float* cos_out) {
  using namespace portable;
  const float t = mul_rn(4.0f, u);
  int q = static_cast<int>(t);                 // floor: t >= 0
  float x = sub_rn(t, static_cast<float>(q));  // exact: fraction of t, in [0, 1)
  const int up = x > 0.5f ? 1 : 0;             // nearest quadrant is the next one
  x = sub_rn(x, static_cast<float>(up));       // exact: x - 1 by Sterbenz, or x - 0
  q += up;
  const float x2 = mul_rn(x, x);
  // (pi/2)^n / n! with alternating signs, n odd (sine) and even (cosine), rounded to float.
  float sp = 0x1.507834p-13f;
  sp = add_rn(-0x1.32d2ccp-8f, mul_rn(x2, sp));
  sp = add_rn(0x1.466bc6p-4f, mul_rn(x2, sp));
  sp = add_rn(-0x1.4abbcep-1f, mul_rn(x2, sp));
  // x pi/2 is the large term of the sine: computed as x_hi * c_hi (exact: 12 by 9 significant
  // bits) plus small terms, so that its rounding does not add to the result's.
  const float x_hi = bits_float(float_bits(x) & 0xFFFFF000u);  // top 12 significant bits
  const float x_lo = sub_rn(x, x_hi);                          // exact, at most 12 bits
  const float c_hi = 0x1.92p+0f;                               // pi/2 to 9 bits
  const float c_lo = 0x1.fb5444p-12f;                          // pi/2 - c_hi, to float
  const float small =
      add_rn(mul_rn(x_lo, c_hi), add_rn(mul_rn(x, c_lo), mul_rn(mul_rn(x, x2), sp)));
  const float s = add_rn(mul_rn(x_hi, c_hi), small);
  float cp = -0x1.a6d1f2p-16f;
  cp = add_rn(0x1.e1f506p-11f, mul_rn(x2, cp));
  cp = add_rn(-0x1.55d3c8p-6f, mul_rn(x2, cp));
  cp = add_rn(0x1.03c1f0p-2f, mul_rn(x2, cp));
  cp = add_rn(-0x1.3bd3ccp+0f, mul_rn(x2, cp));
  const float c = add_rn(1.0f, mul_rn(x2, cp));
  // Quadrant q: (sin, cos) = (s, c), (c, -s), (-s, -c), (-c, s). Selected and negated on the
  // bits, without branches (q is random for random inputs); exact.
  const uint32_t swap = 0u - static_cast<uint32_t>(q & 1);  // all ones in odd quadrants
  const uint32_t s_bits = float_bits(s), c_bits = float_bits(c);
  const uint32_t sin_sign = static_cast<uint32_t>(q & 2) << 30;        // quadrants 2, 3
  const uint32_t cos_sign = static_cast<uint32_t>((q + 1) & 2) << 30;  // quadrants 1, 2
  *sin_out = bits_float(((s_bits & ~swap) | (c_bits & swap)) ^ sin_sign);
  *cos_out = bits_float(((c_bits & ~swap) | (s_bits & swap)) ^ cos_sign);
}

}  // namespace kernels
}  // namespace arcreduce
