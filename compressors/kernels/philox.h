// Philox4x32-10, the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random
// numbers: as easy as 1, 2, 3" (SC'11), and the conversions the kernels draw from it. Every
// function is a pure function of (key, counter): element i of a stream is computed without
// touching elements 0..i-1, so any slice can be regenerated on any device, in any order.
#pragma once

#include <cstdint>

#include "compressors/kernels/portable_math.h"
#include "ops/half.h"  // ARC_HOST_DEVICE

namespace arcreduce {
namespace kernels {

struct Philox4x32 {
  uint32_t v[4];
};

// Round multipliers and Weyl key increments, as published in the paper.
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// Ten rounds of Philox4x32 on `counter` under the 64-bit `key`.
ARC_HOST_DEVICE inline Philox4x32 philox4x32_10(Philox4x32 counter, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key);
  uint32_t k1 = static_cast<uint32_t>(key >> 32);
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// Streams that share a key are kept apart by the third counter word.
enum PhiloxDomain : uint32_t { kDomainGaussian = 0, kDomainSample = 1 };

// Block `block` (64-bit) of stream `domain` under `key`: 128 random bits.
ARC_HOST_DEVICE inline Philox4x32 philox_block(uint64_t key, uint32_t domain, uint64_t block) {
  return philox4x32_10(
      Philox4x32{{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), domain, 0u}},
      key);
}

// A uniform float in (0, 1]: 24 random bits, never 0 (so log() is finite).
ARC_HOST_DEVICE inline float uniform_open0(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1u) * 5.9604644775390625e-8f;  // 2^-24
}
// A uniform float in [0, 1).
ARC_HOST_DEVICE inline float uniform_open1(uint32_t bits) {
  return static_cast<float>(bits >> 8) * 5.9604644775390625e-8f;
}

// Two independent N(0, 1) values from two random words (Box-Muller). Built only from the
// functions of portable_math.h and single IEEE operations, so the values are bit-identical in
// the CPU and CUDA builds of the kernels (libm's logf/cosf/sinf are not).
ARC_HOST_DEVICE inline void box_muller(uint32_t a, uint32_t b, float* z0, float* z1) {
  const float radius = portable::sqrt_rn(portable::mul_rn(-2.0f, portable_log(uniform_open0(a))));
  float sine = 0.0f, cosine = 0.0f;
  portable_sincos_2pi(uniform_open1(b), &sine, &cosine);
  *z0 = portable::mul_rn(radius, cosine);
  *z1 = portable::mul_rn(radius, sine);
}

// The splitmix64 finaliser (Steele, Lea and Flood, OOPSLA'14): a bijective 64-bit mixer used to
// derive keys and to hash index lists.
ARC_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace kernels
}  // namespace arcreduce
