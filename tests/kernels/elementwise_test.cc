// gather/scatter, error-feedback element-wise kernels, casts and the index hash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "compressors/kernels/kernels.h"
#include "ops/half.h"
#include "tests/kernels/test_util.h"

namespace arcreduce {
namespace kernels {
namespace {

using testing::random_floats;

TEST(Gather, PicksIndices) {
  const auto x = random_floats(10, 20);
  const std::vector<int64_t> idx = {9, 0, 4, 4};
  std::vector<float> out(idx.size());
  gather(x.data(), idx.data(), idx.size(), out.data());
  for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(out[i], x[idx[i]]);
  gather(x.data(), nullptr, 0, nullptr);
}

TEST(Scatter, AssignsAndAdds) {
  const std::vector<float> values = {1, 2, 3};
  const std::vector<int64_t> idx = {4, 0, 2};
  std::vector<float> y(5, 10.0f);
  scatter(values.data(), idx.data(), 3, y.data());
  EXPECT_EQ(y, (std::vector<float>{2, 10, 3, 10, 1}));
  scatter_add(values.data(), idx.data(), 3, 0.5f, y.data());
  EXPECT_EQ(y, (std::vector<float>{3, 10, 4.5f, 10, 1.5f}));
  scatter_add(values.data(), idx.data(), 0, 1.0f, y.data());
  scatter(values.data(), idx.data(), 0, y.data());
  EXPECT_EQ(y, (std::vector<float>{3, 10, 4.5f, 10, 1.5f}));
}

TEST(ElementWise, FillScaleAxpbySubtract) {
  for (size_t n : {0u, 1u, 7u, 1001u}) {
    const auto x = random_floats(n, 21), y0 = random_floats(n, 22);
    std::vector<float> y(n);
    fill(y.data(), n, 1.5f);
    for (float v : y) EXPECT_EQ(v, 1.5f);
    y = y0;
    scale(y.data(), n, -2.0f);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], -2.0f * y0[i]);
    y = y0;
    axpby(0.25f, x.data(), 3.0f, y.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], 0.25f * x[i] + 3.0f * y0[i]);
    std::vector<float> out(n);
    subtract(x.data(), y0.data(), out.data(), n);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], x[i] - y0[i]);
  }
}

TEST(ElementWise, MomentumDiffIsMomentumThenDifference) {
  for (size_t n : {0u, 1u, 7u, 1001u}) {
    const auto g = random_floats(n, 31), v0 = random_floats(n, 32), h = random_floats(n, 33);
    std::vector<float> v = v0, diff(n);
    momentum_diff(g.data(), v.data(), h.data(), 0.1f, diff.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float want = (1.0f - 0.1f) * v0[i] + 0.1f * g[i];
      EXPECT_FLOAT_EQ(v[i], want);
      EXPECT_EQ(diff[i], v[i] - h[i]);
    }
    // The restarting variant: the same v and diff, and out = hbar, also when out is g itself.
    const auto hbar = random_floats(n, 34);
    for (bool aliased : {false, true}) {
      std::vector<float> g2 = g, v2 = v0, diff2(n, -1.0f), separate(n, -1.0f);
      float* out = aliased ? g2.data() : separate.data();
      momentum_diff_restart(g2.data(), v2.data(), h.data(), hbar.data(), 0.1f, diff2.data(), out,
                            n);
      EXPECT_EQ(v2, v) << aliased;
      EXPECT_EQ(diff2, diff) << aliased;
      EXPECT_EQ(std::vector<float>(out, out + n), hbar) << aliased;
    }
  }
}

// The one-pass accumulation of ef14 and efm against the two axpby passes it replaces, bit for
// bit, in each of its four forms (with or without the velocity, with or without x).
TEST(ElementWise, AccumulateFeedbackIsTheTwoAxpbyPasses) {
  for (size_t n : {0u, 1u, 7u, 1001u}) {
    const auto g = random_floats(n, 41), u0 = random_floats(n, 42), e0 = random_floats(n, 43);
    const float beta = 0.9f;
    for (bool momentum : {false, true}) {
      std::vector<float> u_want = u0, e_want = e0;
      if (momentum) axpby(1.0f, g.data(), beta, u_want.data(), n);
      axpby(1.0f, momentum ? u_want.data() : g.data(), 1.0f, e_want.data(), n);
      for (bool with_x : {false, true}) {
        std::vector<float> u = u0, e = e0, x(n, -1.0f);
        accumulate_feedback(g.data(), momentum ? u.data() : nullptr, beta, e.data(),
                            with_x ? x.data() : nullptr, n);
        EXPECT_EQ(u, momentum ? u_want : u0) << n << " " << momentum << " " << with_x;
        EXPECT_EQ(e, e_want) << n << " " << momentum << " " << with_x;
        EXPECT_EQ(x, with_x ? e_want : std::vector<float>(n, -1.0f)) << n << " " << momentum;
      }
    }
  }
}

// Values that exercise rounding, subnormals, overflow and NaN in every 16-bit format.
std::vector<float> cast_inputs() {
  auto v = random_floats(997, 23, 100.0f);
  const float special[] = {0.0f,
                           -0.0f,
                           1.0f,
                           -1.0f,
                           65504.0f,
                           65520.0f,
                           1e-7f,
                           6e-8f,
                           3e38f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           1.00048828125f};
  v.insert(v.end(), std::begin(special), std::end(special));
  return v;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(Casts, Float32IsACopy) {
  const auto src = cast_inputs();
  std::vector<float> out(src.size()), back(src.size());
  from_float(src.data(), DType::kFloat32, out.data(), src.size());
  to_float(out.data(), DType::kFloat32, back.data(), src.size());
  for (size_t i = 0; i < src.size(); ++i) EXPECT_TRUE(same_float(back[i], src[i]));
}

TEST(Casts, Float64) {
  const auto src = cast_inputs();
  std::vector<double> wide(src.size());
  from_float(src.data(), DType::kFloat64, wide.data(), src.size());
  for (size_t i = 0; i < src.size(); ++i) EXPECT_TRUE(same_float(float(wide[i]), src[i]));
  const std::vector<double> doubles = {0.1, 1e300, -1e-300, 1.0 + 1e-12};
  std::vector<float> narrow(doubles.size());
  to_float(doubles.data(), DType::kFloat64, narrow.data(), doubles.size());
  for (size_t i = 0; i < doubles.size(); ++i) EXPECT_TRUE(same_float(narrow[i], float(doubles[i])));
}

TEST(Casts, HalfFormatsMatchOpsHalf) {
  const auto src = cast_inputs();
  const size_t n = src.size();
  std::vector<uint16_t> h(n), b(n);
  from_float(src.data(), DType::kFloat16, h.data(), n);
  from_float(src.data(), DType::kBFloat16, b.data(), n);
  std::vector<float> hf(n), bf(n);
  to_float(h.data(), DType::kFloat16, hf.data(), n);
  to_float(b.data(), DType::kBFloat16, bf.data(), n);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(h[i], float_to_fp16(src[i])) << src[i];
    EXPECT_EQ(b[i], float_to_bf16(src[i])) << src[i];
    EXPECT_TRUE(same_float(hf[i], fp16_to_float(h[i])));
    EXPECT_TRUE(same_float(bf[i], bf16_to_float(b[i])));
  }
  // Every 16-bit pattern survives 16 -> 32 -> 16.
  std::vector<uint16_t> all(65536), again(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(65536);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    to_float(all.data(), dtype, wide.data(), all.size());
    from_float(wide.data(), dtype, again.data(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const bool nan = std::isnan(wide[i]);
      if (nan) {
        EXPECT_TRUE(std::isnan(dtype == DType::kFloat16 ? fp16_to_float(again[i])
                                                        : bf16_to_float(again[i])));
      } else {
        ASSERT_EQ(again[i], all[i]) << static_cast<int>(dtype) << " " << i;
      }
    }
  }
}

TEST(HashIndices, OrderSensitiveAndDeterministic) {
  const std::vector<int64_t> a = {1, 5, 9, 200}, b = {5, 1, 9, 200}, c = {1, 5, 9, 201};
  EXPECT_EQ(hash_indices(a.data(), 4), hash_indices(a.data(), 4));
  EXPECT_NE(hash_indices(a.data(), 4), hash_indices(b.data(), 4));
  EXPECT_NE(hash_indices(a.data(), 4), hash_indices(c.data(), 4));
  EXPECT_NE(hash_indices(a.data(), 3), hash_indices(a.data(), 4));
  const std::vector<int64_t> zeros = {0, 0};
  EXPECT_NE(hash_indices(zeros.data(), 1), hash_indices(zeros.data(), 2));
  EXPECT_NE(hash_indices(nullptr, 0), hash_indices(zeros.data(), 1));
}

}  // namespace
}  // namespace kernels
}  // namespace arcreduce
