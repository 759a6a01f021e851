// Dense allreduce through the whole runtime (negotiation, cache, fusion, execution) over the
// loopback world: every world size 1..8, every dtype, sum and average, sizes 0, 1, 7, 1e5,
// ranks submitting in different random orders, several steps so the cache path is used.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <tuple>

#include "tests/runtime/loopback_harness.h"
#include "tests/runtime/reference.h"

namespace arcreduce {
namespace testing {
namespace {

// {3, 100003} spans several 1 MiB chunks in fp32/fp64 (reduced in place); the rest are staged.
const std::vector<std::vector<int64_t>> kShapes = {{0},    {1}, {7},        {100000},
                                                   {3, 5}, {},  {250, 400}, {3, 100003}};

struct Case {
  int size;
  DType dtype;
  ReduceOp op;
  int64_t fusion;
  int64_t cache;
};

void run_case(const Case& c, int steps) {
  Config config = test_config();
  config.fusion_threshold = c.fusion;
  config.cache_capacity = c.cache;
  std::vector<std::vector<std::vector<double>>> results(c.size);  // [rank][tensor] values
  run_runtimes(c.size, config, [&](Runtime& rt, int rank) {
    std::mt19937 rng(1234 + rank);
    for (int step = 0; step < steps; ++step) {
      std::vector<HostTensor> tensors;
      for (size_t t = 0; t < kShapes.size(); ++t) {
        tensors.emplace_back(c.dtype, kShapes[t]);
        for (size_t i = 0; i < tensors[t].count(); ++i) {
          tensors[t].set(i, input_value(rank, static_cast<int>(t) + step, i));
        }
      }
      std::vector<size_t> order(tensors.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<Handle> handles(tensors.size());
      for (size_t t : order) {
        AllreduceOptions options;
        options.op = c.op;
        handles[t] = rt.allreduce_async("grad." + std::to_string(t), tensors[t].view(), options);
      }
      for (size_t t = 0; t < tensors.size(); ++t) {
        Status s = rt.synchronize(handles[t]);
        ASSERT_TRUE(s.ok()) << "rank " << rank << " tensor " << t << ": " << s.message();
        for (size_t i = 0; i < tensors[t].count(); ++i) {
          double want = expected_value(c.size, static_cast<int>(t) + step, i, c.op);
          ASSERT_NEAR(tensors[t].get(i), want, tolerance(c.dtype, c.size, 16))
              << "rank " << rank << " step " << step << " tensor " << t << " element " << i;
        }
      }
      if (step == steps - 1) {
        results[rank].resize(tensors.size());
        for (size_t t = 0; t < tensors.size(); ++t) {
          for (size_t i = 0; i < tensors[t].count(); ++i)
            results[rank][t].push_back(tensors[t].get(i));
        }
      }
    }
    Stats stats = rt.stats();
    EXPECT_EQ(stats.ops_completed, steps * kShapes.size());
    EXPECT_EQ(stats.ops_failed, 0u);
    // With room for every tensor, later steps must hit the cache (a smaller cache may thrash).
    if (c.cache >= static_cast<int64_t>(kShapes.size()) && steps > 1) {
      EXPECT_GT(stats.cache_hits, 0u) << "rank " << rank;
    }
  });
  for (int r = 1; r < c.size; ++r) {
    EXPECT_EQ(results[r], results[0]) << "rank " << r << " differs from rank 0";
  }
}

class AllreduceTest : public ::testing::TestWithParam<std::tuple<int, DType, ReduceOp>> {};

TEST_P(AllreduceTest, MatchesReferenceOnEveryRank) {
  auto [size, dtype, op] = GetParam();
  run_case({size, dtype, op, 64 << 20, 1024}, 3);
}

INSTANTIATE_TEST_SUITE_P(WorldsDtypesOps, AllreduceTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(DType::kFloat32, DType::kFloat64,
                                                              DType::kFloat16, DType::kBFloat16),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAverage)),
                         [](const auto& info) {
                           return "np" + std::to_string(std::get<0>(info.param)) + "_" +
                                  dtype_name(std::get<1>(info.param)) + "_" +
                                  reduce_op_name(std::get<2>(info.param));
                         });

TEST(AllreduceFusionAndCache, FusionOffSmallBucketsAndNoCache) {
  for (int64_t fusion : {int64_t{0}, int64_t{100}, int64_t{4096}}) {
    for (int64_t cache : {int64_t{0}, int64_t{2}}) {
      SCOPED_TRACE("fusion " + std::to_string(fusion) + " cache " + std::to_string(cache));
      run_case({3, DType::kFloat32, ReduceOp::kAverage, fusion, cache}, 3);
    }
  }
}

// fp16 means of values near the top of its range: a plain fp16 sum over 4 ranks would overflow.
TEST(AllreduceHalf, AverageDoesNotOverflow) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    run_runtimes(4, test_config(), [&](Runtime& rt, int rank) {
      HostTensor t(dtype, {64});
      for (size_t i = 0; i < t.count(); ++i) t.set(i, 60000.0 + 100.0 * rank);
      ASSERT_TRUE(rt.synchronize(rt.allreduce_async("big", t.view(), {})).ok());
      for (size_t i = 0; i < t.count(); ++i) {
        ASSERT_TRUE(std::isfinite(t.get(i))) << dtype_name(dtype);
        ASSERT_NEAR(t.get(i), 60150.0, 60150.0 * 4 * tolerance(dtype, 4, 0)) << dtype_name(dtype);
      }
    });
  }
}

TEST(AllreduceOrder, EveryRankExecutesInTheSameOrder) {
  const int size = 5, tensors = 40;
  std::vector<std::vector<std::string>> order(size);
  Config config = test_config();
  config.fusion_threshold = 0;  // one bucket per tensor: the callback order is the exec order
  run_runtimes(size, config, [&](Runtime& rt, int rank) {
    std::mt19937 rng(rank);
    std::vector<float> data(tensors, 1.0f);
    std::vector<int> ids(tensors);
    for (int i = 0; i < tensors; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<Handle> handles;
    for (int id : ids) {
      AllreduceOptions options;
      std::string name = "t" + std::to_string(id);
      options.callback = [&order, rank, name](const Status&) { order[rank].push_back(name); };
      handles.push_back(rt.allreduce_async(name, Tensor{&data[id], DType::kFloat32, {1}}, options));
      if (id % 7 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (Handle h : handles) ASSERT_TRUE(rt.synchronize(h).ok());
  });
  for (int r = 1; r < size; ++r) EXPECT_EQ(order[r], order[0]) << "rank " << r;
  EXPECT_EQ(order[0].size(), static_cast<size_t>(tensors));
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
