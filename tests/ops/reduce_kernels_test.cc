#include "ops/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "arcreduce/status.h"
#include "test_values.h"

namespace arcreduce {
namespace {

using testing::load;
using testing::make_values;
using testing::naive_reduce;

TEST(ReduceKernelsTest, EveryTypeAndOpMatchesNaiveReference) {
  for (ScalarType type : testing::all_types()) {
    for (CollectiveOp op : testing::all_ops()) {
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
        std::vector<char> dst = make_values(type, count, 0, false);
        const std::vector<char> src = make_values(type, count, 1, false);
        std::vector<char> expected = dst;
        naive_reduce(&expected, src, type, op);
        reduce_into(dst.data(), src.data(), count, type, op);
        ASSERT_EQ(dst, expected) << scalar_type_name(type) << " " << collective_op_name(op)
                                 << " count " << count;
      }
    }
  }
}

TEST(ReduceKernelsTest, Fp16SumRoundsOnceInFp32) {
  // 2048 + 1 is not representable in fp16 (spacing 2 there); the fp32 sum 2049 is a tie between
  // 2048 and 2050 and rounds to the even mantissa, 2048. 2050 + 1 = 2051 rounds up to 2052.
  uint16_t dst[2] = {float_to_fp16(2048.0f), float_to_fp16(2050.0f)};
  const uint16_t src[2] = {float_to_fp16(1.0f), float_to_fp16(1.0f)};
  reduce_into(dst, src, 2, ScalarType::kFloat16, CollectiveOp::kSum);
  EXPECT_EQ(fp16_to_float(dst[0]), 2048.0f);
  EXPECT_EQ(fp16_to_float(dst[1]), 2052.0f);
  // Overflow goes to inf, inf + -inf is NaN.
  uint16_t big = float_to_fp16(60000.0f);
  reduce_into(&big, &big + 0, 0, ScalarType::kFloat16, CollectiveOp::kSum);  // count 0: no-op
  const uint16_t other = float_to_fp16(60000.0f);
  reduce_into(&big, &other, 1, ScalarType::kFloat16, CollectiveOp::kSum);
  EXPECT_EQ(big, 0x7c00);
  const uint16_t minus_inf = 0xfc00;
  reduce_into(&big, &minus_inf, 1, ScalarType::kFloat16, CollectiveOp::kSum);
  EXPECT_TRUE(std::isnan(fp16_to_float(big)));
}

TEST(ReduceKernelsTest, MinMaxPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (CollectiveOp op : {CollectiveOp::kMin, CollectiveOp::kMax}) {
    float a[2] = {nan, 1.0f};
    const float b[2] = {1.0f, nan};
    reduce_into(a, b, 2, ScalarType::kFloat32, op);
    EXPECT_TRUE(std::isnan(a[0]) && std::isnan(a[1])) << collective_op_name(op);
    uint16_t h[2] = {float_to_bf16(nan), float_to_bf16(1.0f)};
    const uint16_t g[2] = {float_to_bf16(1.0f), float_to_bf16(nan)};
    reduce_into(h, g, 2, ScalarType::kBFloat16, op);
    EXPECT_TRUE(std::isnan(bf16_to_float(h[0])) && std::isnan(bf16_to_float(h[1])));
  }
}

TEST(ReduceKernelsTest, SignedSumsWrap) {
  int32_t a = std::numeric_limits<int32_t>::max();
  const int32_t one = 1;
  reduce_into(&a, &one, 1, ScalarType::kInt32, CollectiveOp::kSum);
  EXPECT_EQ(a, std::numeric_limits<int32_t>::min());
  int64_t b = std::numeric_limits<int64_t>::min();
  const int64_t minus_one = -1;
  reduce_into(&b, &minus_one, 1, ScalarType::kInt64, CollectiveOp::kSum);
  EXPECT_EQ(b, std::numeric_limits<int64_t>::max());
}

TEST(ReduceKernelsTest, BitOpsActOnFloatBits) {
  float a = 1.0f;         // 0x3f800000
  const float b = -0.0f;  // 0x80000000
  reduce_into(&a, &b, 1, ScalarType::kFloat32, CollectiveOp::kBitOr);
  EXPECT_EQ(a, -1.0f);
  reduce_into(&a, &b, 1, ScalarType::kFloat32, CollectiveOp::kBitAnd);
  EXPECT_EQ(float_bits(a), 0x80000000u);
}

TEST(ReduceKernelsTest, ScaleFloatTypes) {
  std::vector<float> f = {1.0f, -3.0f, 0.5f};
  scale(f.data(), f.size(), ScalarType::kFloat32, 0.25);
  EXPECT_EQ(f, (std::vector<float>{0.25f, -0.75f, 0.125f}));
  std::vector<double> d = {1.0, 3.0};
  scale(d.data(), d.size(), ScalarType::kFloat64, 1.0 / 3.0);
  EXPECT_EQ(d[0], 1.0 / 3.0);
  EXPECT_EQ(d[1], 3.0 * (1.0 / 3.0));
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    std::vector<char> buf = make_values(type, 1000, 3, false);
    std::vector<char> expected = buf;
    for (size_t i = 0; i < 1000; ++i) {
      const uint16_t v = load<uint16_t>(&buf[2 * i]);
      const uint16_t r = type == ScalarType::kFloat16 ? float_to_fp16(fp16_to_float(v) * 0.3f)
                                                      : float_to_bf16(bf16_to_float(v) * 0.3f);
      std::memcpy(&expected[2 * i], &r, 2);
    }
    scale(buf.data(), 1000, type, 0.3);
    EXPECT_EQ(buf, expected) << scalar_type_name(type);
  }
  int32_t i = 4;
  EXPECT_THROW(scale(&i, 1, ScalarType::kInt32, 0.5), Error);
  scale(nullptr, 0, ScalarType::kFloat32, 2.0);  // count 0 touches nothing
}

// scale_copy gives, in one pass, exactly what a copy followed by scale() gives.
TEST(ReduceKernelsTest, ScaleCopyMatchesCopyThenScale) {
  for (ScalarType type :
       {ScalarType::kFloat32, ScalarType::kFloat64, ScalarType::kFloat16, ScalarType::kBFloat16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{1001}}) {
      const std::vector<char> src = make_values(type, n, 7, false);
      std::vector<char> expected = src;
      scale(expected.data(), n, type, 1.0 / 3.0);
      std::vector<char> out(src.size(), 0);
      scale_copy(out.data(), src.data(), n, type, 1.0 / 3.0);
      EXPECT_EQ(out, expected) << scalar_type_name(type) << " n=" << n;
    }
  }
  int32_t i = 4, o = 0;
  EXPECT_THROW(scale_copy(&o, &i, 1, ScalarType::kInt32, 0.5), Error);
  EXPECT_EQ(o, 0);  // rejected before anything is written
}

TEST(ReduceKernelsTest, HalfArrayConversions) {
  const std::vector<float> in = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159f};
  for (ScalarType type : {ScalarType::kFloat16, ScalarType::kBFloat16}) {
    std::vector<uint16_t> half(in.size());
    float_to_half(in.data(), half.data(), in.size(), type);
    std::vector<float> back(in.size());
    half_to_float(half.data(), back.data(), in.size(), type);
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t h = type == ScalarType::kFloat16 ? float_to_fp16(in[i]) : float_to_bf16(in[i]);
      EXPECT_EQ(half[i], h);
      EXPECT_EQ(back[i], type == ScalarType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h));
    }
  }
  float f = 0;
  EXPECT_THROW(float_to_half(&f, &f, 1, ScalarType::kFloat32), Error);
  EXPECT_THROW(half_to_float(&f, &f, 1, ScalarType::kInt64), Error);
}

TEST(ScalarTypeTest, SizesAndNames) {
  EXPECT_EQ(scalar_size(ScalarType::kFloat16), 2u);
  EXPECT_EQ(scalar_size(ScalarType::kUInt64), 8u);
  EXPECT_EQ(scalar_size(ScalarType::kUInt8), 1u);
  EXPECT_STREQ(scalar_type_name(ScalarType::kBFloat16), "bfloat16");
  EXPECT_STREQ(collective_op_name(CollectiveOp::kBitOr), "bitor");
}

}  // namespace
}  // namespace arcreduce
