// join(): a rank out of work takes part in the others' allreduces with zeros until every rank
// has joined; other collectives fail meanwhile, naming it; every rank learns who joined last.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

// `early` joins first; the others reduce `rounds` times (cached after the first) then join.
void run_join(int size, int early, bool warm_cache) {
  std::vector<int> last(size, -2);
  run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(5, 1.0f);
    std::vector<int64_t> ints(3, rank + 1);
    if (warm_cache) {  // every rank: the names are cached before anyone joins
      for (int i = 0; i < 2; ++i) {
        std::fill(data.begin(), data.end(), 1.0f);
        ASSERT_TRUE(
            rt.synchronize(rt.allreduce_async("a", Tensor{data.data(), DType::kFloat32, {5}}, {}))
                .ok());
      }
    }
    if (rank == early) {
      last[rank] = rt.join();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the join arrive first
    for (int round = 0; round < 3; ++round) {
      std::fill(data.begin(), data.end(), 1.0f);
      Status s =
          rt.synchronize(rt.allreduce_async("a", Tensor{data.data(), DType::kFloat32, {5}}, {}));
      ASSERT_TRUE(s.ok()) << s.message();
      // The joined rank added zeros; the average still divides by every rank.
      EXPECT_FLOAT_EQ(data[0], static_cast<float>(size - 1) / size) << "round " << round;
      AllreduceOptions sum;
      sum.op = ReduceOp::kSum;
      std::fill(ints.begin(), ints.end(), rank + 1);
      s = rt.synchronize(rt.allreduce_async("i", Tensor{ints.data(), DType::kInt64, {3}}, sum));
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(ints[0], size * (size + 1) / 2 - (early + 1));
    }
    // Anything but an allreduce fails on every rank that submitted it, naming the joined rank.
    Status b = rt.synchronize(
        rt.broadcast_async("b", Tensor{data.data(), DType::kFloat32, {5}}, early == 0 ? 1 : 0, {}));
    EXPECT_EQ(b.code(), StatusCode::kInvalidArgument) << b.message();
    EXPECT_THAT(b.message(), HasSubstr("rank " + std::to_string(early) + " has joined"));
    last[rank] = rt.join();
  });
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(last[r], last[0]);
    EXPECT_NE(last[r], early);  // it joined first
    EXPECT_GE(last[r], 0);
  }
}

TEST(Join, JoinedRankAddsZerosToAllreducesUntilEveryRankJoins) {
  for (int size : {2, 3, 4}) {
    for (int early : {0, size - 1}) run_join(size, early, false);
  }
}

TEST(Join, CachedAllreducesToo) {
  run_join(3, 1, true);
}

TEST(Join, EveryRankAtOnceAndThenBackToWork) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    const int last = rt.join();
    EXPECT_GE(last, 0);
    EXPECT_LT(last, 3);
    std::vector<float> x(2, static_cast<float>(rank));
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    ASSERT_TRUE(
        rt.synchronize(rt.allreduce_async("after", Tensor{x.data(), DType::kFloat32, {2}}, sum))
            .ok());
    EXPECT_EQ(x[0], 3.0f);
    float y = 0;
    Status s = rt.synchronize(rt.allreduce_async(kJoinName, Tensor{&y, DType::kFloat32, {1}}, {}));
    EXPECT_THAT(s.message(), HasSubstr("reserved for join()"));
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
