// Min, Max and Product, and integer and bool tensors, through the runtime over the loopback
// world: every dtype and op at 1-4 ranks against a naive reduction written here, fused buckets
// included; and the combinations that are refused (on every rank).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

const std::vector<DType> kDtypes = {DType::kFloat32, DType::kFloat64, DType::kUInt8, DType::kInt8,
                                    DType::kInt16,   DType::kInt32,   DType::kInt64, DType::kBool};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                    ReduceOp::kProduct};

bool valid(DType dtype, ReduceOp op) {
  return !(dtype == DType::kBool && op == ReduceOp::kSum);
}

// Element i of `rank`'s tensor as an int64 in the dtype's range (floats: small non-zero
// integers, so every sum and product over 4 ranks is exact).
int64_t value(DType dtype, int rank, size_t i, uint32_t seed) {
  // A mixing hash (splitmix64) of (seed, rank, i): cheap and well spread.
  uint64_t bits =
      seed * 1000003ull + static_cast<uint64_t>(rank) * 7919ull + i * 0x9e3779b97f4a7c15ull;
  bits = (bits ^ (bits >> 30)) * 0xbf58476d1ce4e5b9ull;
  bits = (bits ^ (bits >> 27)) * 0x94d049bb133111ebull;
  bits ^= bits >> 31;
  switch (dtype) {
    case DType::kBool:
      return static_cast<int64_t>(bits & 1);
    case DType::kFloat32:
    case DType::kFloat64:
      // Non-zero, so no product is a signed zero the int64 reference cannot express.
      return (static_cast<int64_t>(bits % 4) + 1) * ((bits >> 8) & 1 ? 1 : -1);
    default:
      return static_cast<int64_t>(bits);  // truncated to the dtype when stored
  }
}

void store(DType dtype, char* p, int64_t v) {
  switch (dtype) {
    case DType::kFloat32: {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      return;
    }
    case DType::kFloat64: {
      const double d = static_cast<double>(v);
      std::memcpy(p, &d, 8);
      return;
    }
    default: {
      const uint64_t u = static_cast<uint64_t>(v);  // little-endian low bytes: two's complement
      std::memcpy(p, &u, dtype_size(dtype));
    }
  }
}

// The stored element back as int64 (sign-extended for signed dtypes).
int64_t load(DType dtype, const char* p) {
  switch (dtype) {
    case DType::kFloat32: {
      float f;
      std::memcpy(&f, p, 4);
      return static_cast<int64_t>(f);
    }
    case DType::kFloat64: {
      double d;
      std::memcpy(&d, p, 8);
      return static_cast<int64_t>(d);
    }
    case DType::kInt8:
      return static_cast<int8_t>(*p);
    case DType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:  // uint8, bool
      return static_cast<uint8_t>(*p);
  }
}

std::vector<char> tensor_of(DType dtype, int rank, size_t n, uint32_t seed) {
  std::vector<char> out(n * dtype_size(dtype));
  for (size_t i = 0; i < n; ++i)
    store(dtype, out.data() + i * dtype_size(dtype), value(dtype, rank, i, seed));
  return out;
}

// Naive reduction in int64 (wrapping as uint64), stored back into the dtype: the low bits of a
// wrapped sum or product are those of the narrow type's.
std::vector<char> expected(DType dtype, ReduceOp op, int size, size_t n, uint32_t seed) {
  std::vector<char> out(n * dtype_size(dtype));
  std::vector<std::vector<char>> inputs;
  for (int r = 0; r < size; ++r) inputs.push_back(tensor_of(dtype, r, n, seed));
  for (size_t i = 0; i < n; ++i) {
    int64_t acc = load(dtype, inputs[0].data() + i * dtype_size(dtype));
    for (int r = 1; r < size; ++r) {
      const int64_t x = load(dtype, inputs[r].data() + i * dtype_size(dtype));
      const uint64_t ua = static_cast<uint64_t>(acc), ux = static_cast<uint64_t>(x);
      switch (op) {
        case ReduceOp::kSum:
          acc = static_cast<int64_t>(ua + ux);
          break;
        case ReduceOp::kProduct:
          acc = static_cast<int64_t>(ua * ux);
          break;
        case ReduceOp::kMin:
          acc = std::min(acc, x);
          break;
        default:
          acc = std::max(acc, x);
      }
      // Back through the dtype, so the next step sees the wrapped narrow value.
      char tmp[8];
      store(dtype, tmp, acc);
      acc = load(dtype, tmp);
    }
    store(dtype, out.data() + i * dtype_size(dtype), acc);
  }
  return out;
}

TEST(ReduceOps, EveryDtypeAndOpMatchesANaiveReductionFusedOrNot) {
  for (int size : {1, 2, 3, 4}) {
    run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
      for (DType dtype : kDtypes) {
        for (ReduceOp op : kOps) {
          if (!valid(dtype, op)) continue;
          // Three tensors submitted together (fused into one bucket) of sizes 0, 1 and 301.
          const std::vector<size_t> sizes = {0, 1, 301};
          std::vector<std::vector<char>> data;
          std::vector<Handle> handles;
          for (size_t k = 0; k < sizes.size(); ++k)
            data.push_back(tensor_of(dtype, rank, sizes[k], 17 + k));
          for (size_t k = 0; k < sizes.size(); ++k) {
            AllreduceOptions options;
            options.op = op;
            const std::string name =
                std::string(dtype_name(dtype)) + "." + reduce_op_name(op) + "." + std::to_string(k);
            handles.push_back(rt.allreduce_async(
                name, Tensor{data[k].data(), dtype, {static_cast<int64_t>(sizes[k])}}, options));
          }
          for (size_t k = 0; k < sizes.size(); ++k) {
            Status s = rt.synchronize(handles[k]);
            ASSERT_TRUE(s.ok()) << s.message();
            EXPECT_EQ(data[k], expected(dtype, op, size, sizes[k], 17 + k))
                << dtype_name(dtype) << " " << reduce_op_name(op) << " size " << size << " rank "
                << rank << " tensor " << k;
          }
        }
      }
    });
  }
}

TEST(ReduceOps, InexactOrUncompressibleCombinationsAreRefusedOnEveryRank) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int) {
    int32_t ints[4] = {1, 2, 3, 4};
    bool bools[2] = {true, false};
    float floats[2] = {1, 2};
    struct Case {
      std::string name;
      Tensor tensor;
      ReduceOp op;
      std::optional<std::string> compressor;
      std::string expect;
    };
    const std::vector<Case> cases = {
        {"avg", Tensor{ints, DType::kInt32, {4}}, ReduceOp::kAverage, std::nullopt,
         "the average of dtype int32 is not exact"},
        {"bsum", Tensor{bools, DType::kBool, {2}}, ReduceOp::kSum, std::nullopt,
         "allreduce of bool takes min (and), max (or) or product (and), not sum"},
        {"itopk", Tensor{ints, DType::kInt32, {4}}, ReduceOp::kSum, std::string("topk"),
         "compressor 'topk' applies to sums and averages"},
        {"fmax", Tensor{floats, DType::kFloat32, {2}}, ReduceOp::kMax, std::string("arctopk"),
         "max of float32 is reduced exactly, without compression"},
        {"badop", Tensor{floats, DType::kFloat32, {2}}, static_cast<ReduceOp>(9), std::nullopt,
         "unknown reduce op 9"},
    };
    for (const Case& c : cases) {
      AllreduceOptions options;
      options.op = c.op;
      options.compression.compressor = c.compressor;
      Status s = rt.synchronize(rt.allreduce_async(c.name, c.tensor, options));
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.name << ": " << s.message();
      EXPECT_THAT(s.message(), HasSubstr(c.expect)) << c.name;
      EXPECT_THAT(s.message(), HasSubstr("'" + c.name + "'"));
    }
    // The job's compressor does not apply to an integer sum: reduced exactly.
    int64_t counts[3] = {1, 2, 3};
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    Status s =
        rt.synchronize(rt.allreduce_async("counts", Tensor{counts, DType::kInt64, {3}}, sum));
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(counts[2], 9);
  });
}

TEST(ReduceOps, TheJobsCompressorIsNotAppliedToIntegersOrMinMax) {
  Config config = test_config();
  config.compressor = "topk";
  config.compress_ratio = 0.01;
  config.min_compress_elements = 1;
  run_runtimes(2, config, [&](Runtime& rt, int rank) {
    std::vector<int32_t> ints(1000, rank + 1);
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    ASSERT_TRUE(
        rt.synchronize(rt.allreduce_async("ints", Tensor{ints.data(), DType::kInt32, {1000}}, sum))
            .ok());
    for (int32_t v : ints) ASSERT_EQ(v, 3);
    std::vector<float> floats(1000, static_cast<float>(rank));
    AllreduceOptions max;
    max.op = ReduceOp::kMax;
    ASSERT_TRUE(rt.synchronize(rt.allreduce_async(
                                   "fmax", Tensor{floats.data(), DType::kFloat32, {1000}}, max))
                    .ok());
    for (float v : floats) ASSERT_EQ(v, 1.0f);
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
