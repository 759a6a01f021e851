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

// Shifts `value` right by `shift` (1..31) bits, rounding to nearest with ties to even.
ARC_HOST_DEVICE inline uint32_t shift_right_rne(uint32_t value, int shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1u))) ? 1u : 0u);
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

ARC_HOST_DEVICE inline uint16_t float_to_fp16(float value) {
  const uint32_t bits = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN
    if (magnitude == 0x7f800000u) return sign | 0x7c00u;
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  }
  // 65520 lies halfway between 65504 (largest fp16) and 65536; ties-to-even rounds it up to inf.
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;
  if (magnitude >= 0x38800000u) {  // normal fp16 (>= 2^-14): rebias, then drop 13 bits
    return static_cast<uint16_t>(sign | shift_right_rne(magnitude - (112u << 23), 13));
  }
  // 2^-25 is halfway between 0 and the smallest subnormal 2^-24; ties-to-even gives 0.
  if (magnitude <= 0x33000000u) return sign;
  // Subnormal fp16: value = m * 2^(e - 150), in units of 2^-24 that is m >> (126 - e).
  const uint32_t exponent = magnitude >> 23;
  const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
  return static_cast<uint16_t>(sign | shift_right_rne(mantissa, static_cast<int>(126u - exponent)));
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
