// ARC-Top-K kernels: sketch, scores, row selection, row gather/scatter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "tests/kernels/test_util.h"

namespace arcreduce {
namespace kernels {
namespace {

using testing::naive_top_k;
using testing::random_floats;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

class SketchTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int>> {};

TEST_P(SketchTest, MatchesDoubleReference) {
  const auto [n, m, r] = GetParam();
  const auto y = random_floats(n * m, 1);
  const auto v = random_floats(m * r, 2);
  std::vector<float> p(n * r + 1, -7.0f);  // one guard element
  sketch(y.data(), n, m, v.data(), r, p.data());
  for (int64_t j = 0; j < n; ++j) {
    for (int c = 0; c < r; ++c) {
      double exact = 0, magnitude = 0;
      for (int64_t i = 0; i < m; ++i) {
        exact += double(y[j * m + i]) * v[i * r + c];
        magnitude += std::fabs(double(y[j * m + i]) * v[i * r + c]);
      }
      // fp32 accumulation bound: (m + 1) roundings of at most 2^-24 relative each.
      ASSERT_NEAR(p[j * r + c], exact, 6e-8 * double(m + 1) * magnitude) << j << "," << c;
    }
  }
  EXPECT_EQ(p[n * r], -7.0f);
  // Deterministic: bit-identical on a second run.
  std::vector<float> again(n * r + 1, -7.0f);
  sketch(y.data(), n, m, v.data(), r, again.data());
  EXPECT_EQ(again, p);
  // Transposed projection, sketched in uneven row blocks: bit-identical to one call.
  std::vector<float> vt(m * r + 1, -7.0f);
  transpose_projection(v.data(), m, r, vt.data());
  for (int64_t i = 0; i < m; ++i) {
    for (int c = 0; c < r; ++c) ASSERT_EQ(vt[c * m + i], v[i * r + c]);
  }
  EXPECT_EQ(vt[m * r], -7.0f);
  std::vector<float> blocked(n * r + 1, -7.0f);
  for (int64_t begin = 0, block = 1; begin < n; begin += block, block += 2) {
    const int64_t rows = std::min(block, n - begin);
    sketch_transposed(y.data() + begin * m, rows, m, vt.data(), r, blocked.data() + begin * r);
  }
  EXPECT_EQ(blocked, p);
}

// The lane layout's exact arithmetic, written out: lane l sums elements l, l + 32, ... of the
// row in order, then lanes are added pairwise, 16 apart, 8 apart, ..., 1 apart (the tests are
// compiled without contraction, as the kernels).
float lane_tree_dot(const float* y, const float* v, int64_t m) {
  float lanes[32] = {};
  for (int64_t i = 0; i < m; ++i) lanes[i % 32] += y[i] * v[i];
  for (int width = 16; width >= 1; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

TEST_P(SketchTest, LaneLayoutIsTheSameArithmeticAsTheRowLayout) {
  const auto [n, m, r] = GetParam();
  const auto y = random_floats(n * m, 11);
  const auto vt = random_floats(m * r, 12);
  std::vector<float> lanes(n * r + 1, -7.0f);
  detail::sketch_transposed_lanes(y.data(), n, m, vt.data(), r, lanes.data());
  for (int64_t j = 0; j < n; ++j) {
    for (int c = 0; c < r; ++c) {
      ASSERT_EQ(lanes[j * r + c], lane_tree_dot(&y[j * m], &vt[c * m], m)) << j << "," << c;
    }
  }
  EXPECT_EQ(lanes[n * r], -7.0f);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SketchTest,
                         ::testing::Combine(::testing::Values(0, 1, 7, 64),
                                            ::testing::Values(1, 3, 4, 13, 384),
                                            ::testing::Values(1, 2, 3, 4, 5, 8)));

TEST(FillGaussianTransposed, IsFillGaussianThenTranspose) {
  for (const auto& [m, r] : std::vector<std::pair<int64_t, int>>{
           {0, 4}, {3, 0}, {1, 1}, {3, 3}, {5, 4}, {13, 5}, {384, 4}, {7, 8}}) {
    const uint64_t key = philox_key(7, "w", static_cast<uint64_t>(m));
    std::vector<float> v(m * r + 1, -7.0f), expected(m * r + 1, -7.0f), fused(m * r + 1, -7.0f);
    fill_gaussian(key, v.data(), static_cast<size_t>(m * r));
    transpose_projection(v.data(), m, r, expected.data());
    fill_gaussian_transposed(key, m, r, fused.data());
    EXPECT_EQ(fused, expected) << "m=" << m << " r=" << r;  // the guard element included
  }
}

TEST(SketchRowScores, SumOfSquares) {
  for (int r : {1, 3, 4}) {
    const int64_t n = 11;
    const auto p = random_floats(n * r, 3);
    std::vector<float> scores(n);
    sketch_row_scores(p.data(), n, r, scores.data());
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int c = 0; c < r; ++c) exact += double(p[j * r + c]) * p[j * r + c];
      EXPECT_NEAR(scores[j], exact, 1e-5 * exact);
    }
  }
  sketch_row_scores(nullptr, 0, 4, nullptr);
}

TEST(RowSqNorms, SumOfSquares) {
  for (int64_t m : {1, 7, 8, 9, 384}) {
    const int64_t n = 5;
    const auto y = random_floats(n * m, 4);
    std::vector<float> scores(n);
    row_sq_norms(y.data(), n, m, scores.data());
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0;
      for (int64_t i = 0; i < m; ++i) exact += double(y[j * m + i]) * y[j * m + i];
      EXPECT_NEAR(scores[j], exact, 1e-5 * exact) << "m=" << m;
    }
  }
  row_sq_norms(nullptr, 0, 3, nullptr);
}

// Both selections (the sampled one of the CPU build, the sort of the CUDA build) against the
// naive reference.
void expect_top_k_rows(const std::vector<float>& scores, int64_t k) {
  const auto n = static_cast<int64_t>(scores.size());
  const std::vector<int64_t> expected = naive_top_k(scores, k);
  for (const bool by_sort : {false, true}) {
    std::vector<int64_t> rows(k + 1, -1);
    if (by_sort) {
      detail::top_k_rows_by_sort(scores.data(), n, k, rows.data());
    } else {
      top_k_rows(scores.data(), n, k, rows.data());
    }
    EXPECT_EQ(rows[k], -1) << "wrote past k";
    rows.resize(k);
    EXPECT_EQ(rows, expected) << "n=" << n << " k=" << k << (by_sort ? " by sort" : " sampled");
  }
}

TEST(TopKRows, SmallSizesAllK) {
  for (int64_t n : {0, 1, 2, 3, 17}) {
    const auto scores = random_floats(n, 5);
    for (int64_t k = 0; k <= n; ++k) expect_top_k_rows(scores, k);
  }
}

TEST(TopKRows, TiesGoToLowerRow) {
  expect_top_k_rows(std::vector<float>(9, 2.5f), 4);
  expect_top_k_rows({1, 3, 3, 2, 3, 0}, 2);
  expect_top_k_rows({0.0f, -0.0f, 0.0f, -1.0f}, 2);  // -0 ties with +0
  expect_top_k_rows(std::vector<float>(5000, 1.0f), 50);
}

TEST(TopKRows, NaNRanksAboveEverything) {
  const float inf = std::numeric_limits<float>::infinity();
  expect_top_k_rows({1.0f, kNaN, inf, -kNaN, 5.0f}, 1);
  expect_top_k_rows({1.0f, kNaN, inf, -kNaN, 5.0f}, 3);
  expect_top_k_rows({-inf, -1.0f, -2.0f, 0.0f}, 2);
}

TEST(TopKRows, LargeSampledPath) {
  for (int64_t n : {2047, 2048, 8192, 100003}) {
    auto scores = testing::abs_of(random_floats(n, 6));
    for (int64_t k : {int64_t{1}, n / 100, n / 100 + 1, n / 2, n - 1}) expect_top_k_rows(scores, k);
  }
}

TEST(GatherScatterRows, RoundTrip) {
  const int64_t n = 9, m = 5;
  const auto y = random_floats(n * m, 7);
  const std::vector<int64_t> rows = {0, 3, 8};
  std::vector<float> packed(rows.size() * m);
  gather_rows(y.data(), m, rows.data(), rows.size(), packed.data());
  for (size_t j = 0; j < rows.size(); ++j) {
    for (int64_t c = 0; c < m; ++c) EXPECT_EQ(packed[j * m + c], y[rows[j] * m + c]);
  }
  std::vector<float> out(n * m, 0.5f);
  scatter_rows(packed.data(), m, rows.data(), rows.size(), out.data());
  for (int64_t j = 0; j < n; ++j) {
    const bool selected = j == 0 || j == 3 || j == 8;
    for (int64_t c = 0; c < m; ++c) EXPECT_EQ(out[j * m + c], selected ? y[j * m + c] : 0.5f);
  }
  gather_rows(y.data(), m, nullptr, 0, nullptr);
  scatter_rows(nullptr, m, nullptr, 0, out.data());
}

TEST(GatherScatterRows, ElementLayoutMatchesTheRowLayout) {
  for (int64_t m : {1, 3, 64, 193}) {
    const int64_t n = 37;
    const auto y = random_floats(n * m, 13);
    const std::vector<int64_t> rows = {0, 1, 5, 17, 36};
    const int64_t k = static_cast<int64_t>(rows.size());
    std::vector<float> by_row(k * m + 1, -7.0f), by_element(k * m + 1, -7.0f);
    gather_rows(y.data(), m, rows.data(), k, by_row.data());
    detail::gather_rows_elements(y.data(), m, rows.data(), k, by_element.data());
    EXPECT_EQ(by_element, by_row) << "m=" << m;
    std::vector<float> out_row(n * m, 0.5f), out_element(n * m, 0.5f);
    scatter_rows(by_row.data(), m, rows.data(), k, out_row.data());
    detail::scatter_rows_elements(by_row.data(), m, rows.data(), k, out_element.data());
    EXPECT_EQ(out_element, out_row) << "m=" << m;
  }
  detail::gather_rows_elements(nullptr, 4, nullptr, 0, nullptr);
  detail::scatter_rows_elements(nullptr, 4, nullptr, 0, nullptr);
}

}  // namespace
}  // namespace kernels
}  // namespace arcreduce
