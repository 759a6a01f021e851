// Conversions between fp32 and the two 16-bit float formats that travel through collectives:
// IEEE 754 binary16 ("fp16") and bfloat16 ("bf16"). Values are carried as raw uint16_t bit
// patterns so the code needs no compiler half type and compiles unchanged under nvcc.
//
// Contract of every float -> 16-bit conversion: round to nearest, ties to even; values beyond
// the largest finite value become +/-inf; NaN stays NaN (quiet, sign and the top payload bits
// kept); subnormals are produced and read exactly. 16-bit -> float conversions are exact.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ARC_HOST_DEVICE __host__ __device__
#else
#define ARC_HOST_DEVICE
#endif

namespace arcreduce {

ARC_HOST_DEVICE inline uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

ARC_HOST_DEVICE inline float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

ARC_HOST_DEVICE inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
  if (exponent != 0) return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return bits_float(sign | float_bits(magnitude));
}

// Written with selects instead of branches so that loops over it vectorise; bit-identical to
// rounding each case separately (checked against that over all 2^32 inputs).
ARC_HOST_DEVICE inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t magnitude = bits & 0x7fffffffu;
  // Normal fp16 (>= 2^-14): rebias the exponent and drop 13 bits, ties to even. Anything from
  // 65520 up (halfway between 65504, the largest fp16, and 65536) rounds to inf: the clamp.
  const uint32_t rebiased = magnitude - (112u << 23);
  const uint32_t rounded = (rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13;
  const uint32_t normal = rounded < 0x7c00u ? rounded : 0x7c00u;
  // Subnormal fp16 (< 2^-14): adding 0.5 leaves |x| / 2^-24 rounded to nearest even in the
  // low mantissa bits of the sum (the fp32 ulp of 0.5 is 2^-24); 2^-25 and below give 0.
  const uint32_t subnormal = float_bits(bits_float(magnitude) + 0.5f) - 0x3f000000u;
  uint32_t result = magnitude < 0x38800000u ? subnormal : normal;
  if (magnitude >= 0x7f800000u) {  // inf, or NaN keeping its top payload bits, made quiet
    result = magnitude == 0x7f800000u ? 0x7c00u : (0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  return static_cast<uint16_t>(sign | result);
}

ARC_HOST_DEVICE inline float bf16_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

ARC_HOST_DEVICE inline uint16_t float_to_bf16(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; overflow carries into inf.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace arcreduce
