// top_k_abs against a full stable sort, on inputs chosen to stress its sampled threshold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "tests/kernels/test_util.h"

namespace arcreduce {
namespace kernels {
namespace {

using testing::abs_of;
using testing::naive_top_k;
using testing::random_floats;

void expect_top_k_abs(const std::vector<float>& x, int64_t k) {
  std::vector<int64_t> got(k + 1, -1);
  top_k_abs(x.data(), static_cast<int64_t>(x.size()), k, got.data());
  EXPECT_EQ(got[k], -1) << "wrote past k";
  got.resize(k);
  ASSERT_EQ(got, naive_top_k(abs_of(x), k)) << "n=" << x.size() << " k=" << k;
}

TEST(TopKAbs, SmallSizesAllK) {
  for (int64_t n : {0, 1, 2, 5, 33}) {
    const auto x = random_floats(n, 10);
    for (int64_t k = 0; k <= n; ++k) expect_top_k_abs(x, k);
  }
}

TEST(TopKAbs, SignDoesNotMatterTiesToLowerIndex) {
  expect_top_k_abs({-3, 3, 1, -3, 2}, 2);
  expect_top_k_abs({-0.0f, 0.0f, 0.0f}, 1);
  expect_top_k_abs(std::vector<float>(10, -1.0f), 3);
}

TEST(TopKAbs, NaNAndInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  expect_top_k_abs({1, -inf, nan, 2, -nan, inf}, 1);
  expect_top_k_abs({1, -inf, nan, 2, -nan, inf}, 2);
  expect_top_k_abs({1, -inf, nan, 2, -nan, inf}, 4);
  auto x = random_floats(10000, 11);
  x[17] = nan;
  x[9000] = -nan;
  x[5] = inf;
  expect_top_k_abs(x, 2);
  expect_top_k_abs(x, 100);
}

TEST(TopKAbs, LargeRandom) {
  for (int64_t n : {2047, 4096, 100001, 589824}) {
    const auto x = random_floats(n, 12);
    for (int64_t k : {int64_t{1}, n / 1000, n / 100, n / 10, n - 1, n}) expect_top_k_abs(x, k);
  }
}

// Orders that defeat a strided sample: sorted, reverse sorted, period equal to the stride,
// heavy ties at and around the threshold.
TEST(TopKAbs, AdversarialPatterns) {
  const int64_t n = 65536;
  std::vector<float> ascending(n), descending(n), periodic(n), few_values(n), tied_tail(n);
  for (int64_t i = 0; i < n; ++i) {
    ascending[i] = float(i);
    descending[i] = float(n - i);
    periodic[i] = (i % 16 == 0) ? 0.0f : float(i % 977);  // the sample sees only zeros
    few_values[i] = float(i % 3);
    tied_tail[i] = i < 100 ? 10.0f : 1.0f;
  }
  for (const auto* x : {&ascending, &descending, &periodic, &few_values, &tied_tail}) {
    for (int64_t k : {int64_t{1}, int64_t{99}, int64_t{100}, int64_t{101}, n / 100, n / 3 + 7})
      expect_top_k_abs(*x, k);
  }
  expect_top_k_abs(std::vector<float>(n, 0.0f), 655);
}

TEST(TopKAbs, Deterministic) {
  const auto x = random_floats(300000, 13);
  std::vector<int64_t> a(3000), b(3000);
  top_k_abs(x.data(), x.size(), 3000, a.data());
  top_k_abs(x.data(), x.size(), 3000, b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace kernels
}  // namespace arcreduce
