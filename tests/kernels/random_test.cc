// Philox, stream keys, Gaussians and Rand-K index sampling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "compressors/kernels/philox.h"

namespace arcreduce {
namespace kernels {
namespace {

// Known-answer vectors of Philox4x32-10 published with the Random123 library.
TEST(Philox, KnownAnswers) {
  struct Case {
    Philox4x32 counter;
    uint64_t key;
    Philox4x32 expected;
  };
  const Case cases[] = {
      {{{0, 0, 0, 0}}, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffffffffffull,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0x299f31d0a4093822ull,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Case& c : cases) {
    const Philox4x32 got = philox4x32_10(c.counter, c.key);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], c.expected.v[i]) << "word " << i;
  }
}

TEST(PhiloxKey, DeterministicAndSensitiveToEveryInput) {
  const uint64_t base = philox_key(7, "layer1.weight", 3);
  EXPECT_EQ(base, philox_key(7, "layer1.weight", 3));
  EXPECT_NE(base, philox_key(8, "layer1.weight", 3));
  EXPECT_NE(base, philox_key(7, "layer1.weighu", 3));
  EXPECT_NE(base, philox_key(7, "layer1.weight", 4));
  EXPECT_NE(philox_key(0, "", 0), philox_key(0, std::string_view("\0", 1), 0));
  // Many steps of one tensor give distinct keys.
  std::set<uint64_t> keys;
  for (uint64_t step = 0; step < 10000; ++step) keys.insert(philox_key(1, "w", step));
  EXPECT_EQ(keys.size(), 10000u);
}

TEST(FillGaussian, EmptyAndSingle) {
  fill_gaussian(1, nullptr, 0);
  float one = NAN;
  fill_gaussian(1, &one, 1);
  EXPECT_TRUE(std::isfinite(one));
}

TEST(FillGaussian, ElementIsPureFunctionOfKeyAndIndex) {
  const uint64_t key = philox_key(1, "w", 0);
  std::vector<float> full(1001);
  fill_gaussian(key, full.data(), full.size());
  for (size_t n : {1u, 2u, 3u, 5u, 7u, 999u}) {
    std::vector<float> prefix(n);
    fill_gaussian(key, prefix.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(prefix[i], full[i]) << "n=" << n << " i=" << i;
  }
  std::vector<float> again(full.size());
  fill_gaussian(key, again.data(), again.size());
  EXPECT_EQ(again, full);
  std::vector<float> other(full.size());
  fill_gaussian(philox_key(1, "w", 1), other.data(), other.size());
  int equal = 0;
  for (size_t i = 0; i < full.size(); ++i) equal += other[i] == full[i];
  EXPECT_LT(equal, 3);
}

TEST(FillGaussian, Moments) {
  constexpr size_t kN = 1000000;
  std::vector<float> z(kN);
  fill_gaussian(philox_key(42, "moments", 0), z.data(), kN);
  double sum = 0, sum2 = 0, sum4 = 0;
  size_t beyond3 = 0;
  for (float x : z) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += double(x) * x;
    sum4 += double(x) * x * x * x;
    beyond3 += std::fabs(x) > 3.0f;
  }
  const double mean = sum / kN, var = sum2 / kN - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.005);  // sd of the mean is 0.001
  EXPECT_NEAR(var, 1.0, 0.01);
  EXPECT_NEAR(sum4 / kN, 3.0, 0.05);                  // Gaussian kurtosis
  EXPECT_NEAR(beyond3 / double(kN), 0.0027, 0.0005);  // P(|z| > 3)
}

TEST(SampleIndices, EdgeCases) {
  std::vector<int64_t> out(5, -1);
  sample_indices(1, 0, 0, out.data());
  sample_indices(1, 10, 0, out.data());
  EXPECT_EQ(out[0], -1);
  sample_indices(1, 1, 1, out.data());
  EXPECT_EQ(out[0], 0);
  sample_indices(1, 5, 5, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

// Floyd's set does not depend on how membership is stored: bitmap and hash set agree.
TEST(SampleIndices, BitmapAndHashSetAgree) {
  for (int64_t n : {1, 63, 64, 65, 1000, 100003}) {
    for (int64_t k : {int64_t{1}, n / 100 + 1, n / 64, n / 2, n}) {
      if (k < 1 || k > n) continue;
      std::vector<int64_t> a(k), b(k);
      detail::sample_indices_floyd(7, n, k, a.data(), true);
      detail::sample_indices_floyd(7, n, k, b.data(), false);
      ASSERT_EQ(a, b) << n << " " << k;
    }
  }
}

TEST(SampleIndices, DistinctSortedInRangeDeterministic) {
  for (int64_t n : std::vector<int64_t>{1, 2, 7, 100, 12345, int64_t{1} << 40}) {
    for (int64_t k : std::vector<int64_t>{1, std::min<int64_t>(n, 3), std::min<int64_t>(n, 1000)}) {
      std::vector<int64_t> a(k), b(k);
      sample_indices(99, n, k, a.data());
      sample_indices(99, n, k, b.data());
      EXPECT_EQ(a, b);
      for (int64_t i = 0; i < k; ++i) {
        ASSERT_GE(a[i], 0);
        ASSERT_LT(a[i], n);
        if (i > 0) {
          ASSERT_LT(a[i - 1], a[i]);
        }
      }
    }
  }
  std::vector<int64_t> a(50), b(50);
  sample_indices(1, 1000000, 50, a.data());
  sample_indices(2, 1000000, 50, b.data());
  EXPECT_NE(a, b);
}

// Each of n positions is picked with probability k/n: chi-square over many keys.
TEST(SampleIndices, UniformCoverage) {
  constexpr int64_t kN = 50, kK = 5, kTrials = 20000;
  std::vector<double> hits(kN, 0);
  std::vector<int64_t> out(kK);
  for (int64_t trial = 0; trial < kTrials; ++trial) {
    sample_indices(philox_key(3, "randk", trial), kN, kK, out.data());
    for (int64_t i : out) hits[i] += 1;
  }
  const double expected = double(kTrials) * kK / kN;
  double chi2 = 0;
  for (double h : hits) chi2 += (h - expected) * (h - expected) / expected;
  // 49 degrees of freedom: mean 49, sd ~10; 120 is far in the tail.
  EXPECT_LT(chi2, 120.0);
}

}  // namespace
}  // namespace kernels
}  // namespace arcreduce
