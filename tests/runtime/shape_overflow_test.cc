// Shapes whose element or byte counts do not fit in 64 bits are refused with the tensor's name,
// on the rank that submitted them and, for sums over ranks (an allgather's output), on every
// rank: never a wrapped count that reduces the wrong memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(ShapeOverflow, CountsOfShapes) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({0, int64_t{1} << 62, int64_t{1} << 62}), 0);
  EXPECT_EQ(num_elements({int64_t{1} << 31, int64_t{1} << 31}), int64_t{1} << 62);
  EXPECT_EQ(num_elements({int64_t{1} << 32, int64_t{1} << 32}), -1);    // 2^64 wraps to 0
  EXPECT_EQ(num_elements({3037000500, 3037000500}), -1);                // wraps negative
  EXPECT_EQ(num_elements({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);  // zero after overflow
  EXPECT_EQ(num_elements({-1, 4}), -1);
  EXPECT_EQ(num_bytes({int64_t{1} << 61}, DType::kFloat32), -1);  // 2^63 bytes
  EXPECT_EQ(num_bytes({int64_t{1} << 60}, DType::kFloat32), int64_t{1} << 62);
}

// Each shape below has elements enough to wrap a 64-bit product (to 0, to a negative number, or
// past the bytes of its dtype); every one fails on the submitting rank, naming the tensor.
TEST(ShapeOverflow, SubmissionRefusedWithTheTensorsName) {
  const std::vector<std::vector<int64_t>> shapes = {
      {int64_t{1} << 32, int64_t{1} << 32},
      {3037000500, 3037000500},
      {int64_t{1} << 61},  // 2^61 float32 elements: 2^63 bytes
  };
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    float dummy = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const std::string name = "huge" + std::to_string(i);
      Status s =
          rt.synchronize(rt.allreduce_async(name, Tensor{&dummy, DType::kFloat32, shapes[i]}, {}));
      ASSERT_FALSE(s.ok()) << name;
      EXPECT_THAT(s.message(), HasSubstr("tensor '" + name + "'"));
      EXPECT_THAT(s.message(), HasSubstr("64-bit")) << s.message();
      Status b = rt.synchronize(
          rt.broadcast_async(name + "_b", Tensor{&dummy, DType::kFloat32, shapes[i]}, 0, {}));
      ASSERT_FALSE(b.ok());
      EXPECT_THAT(b.message(), HasSubstr("64-bit")) << b.message();
    }
    // The runtime goes on.
    float x = static_cast<float>(rank + 1);
    Status ok = rt.synchronize(rt.allreduce_async("after", Tensor{&x, DType::kFloat32, {1}}, {}));
    ASSERT_TRUE(ok.ok()) << ok.message();
    EXPECT_FLOAT_EQ(x, 1.5f);
  });
}

// Every rank's input fits (2^59 rows of 8 bytes: 2^62 bytes), but the allgather's output, the
// rows of both, would be 2^63 bytes: the op fails on every rank before any output is allocated.
TEST(ShapeOverflow, AllgatherOutputThatOverflowsFailsOnEveryRank) {
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    double dummy = 0;
    bool allocated = false;
    CollectiveOptions options;
    options.allocate = [&](const std::vector<int64_t>&, const std::vector<int64_t>&) -> void* {
      allocated = true;
      return nullptr;
    };
    Status s =
        rt.synchronize(rt.shaped_async("wide", Tensor{&dummy, DType::kFloat64, {int64_t{1} << 59}},
                                       options, Collective::kAllgather));
    ASSERT_FALSE(s.ok()) << "rank " << rank;
    EXPECT_THAT(s.message(), HasSubstr("tensor 'wide'"));
    EXPECT_THAT(s.message(), HasSubstr("64-bit"));
    EXPECT_FALSE(allocated);
    float x = 1;
    Status ok = rt.synchronize(rt.allreduce_async("after", Tensor{&x, DType::kFloat32, {1}}, {}));
    ASSERT_TRUE(ok.ok()) << ok.message();
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
