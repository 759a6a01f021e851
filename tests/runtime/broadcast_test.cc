// Broadcast through the runtime over the loopback world: every dtype, world sizes 1-5, sizes 0
// and 1, many tensors per cycle (fused by root), mixed with allreduce, and the error paths
// (mismatched shape/dtype/root, a root that is not a rank, bad tensors, integer allreduce).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

const DType kAllDtypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                            DType::kUInt8,   DType::kInt8,    DType::kInt16,   DType::kInt32,
                            DType::kInt64,   DType::kBool};

// Bytes that differ per rank and per position, so a result equal to the root's bytes can only
// come from the root.
std::vector<unsigned char> rank_bytes(int rank, size_t bytes) {
  std::vector<unsigned char> b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(rank * 37 + i * 11 + 1);
  return b;
}

class BroadcastEveryDtype : public ::testing::TestWithParam<std::tuple<int, DType>> {};

TEST_P(BroadcastEveryDtype, EveryRankGetsTheRootsBytes) {
  const int size = std::get<0>(GetParam());
  const DType dtype = std::get<1>(GetParam());
  const std::vector<std::vector<int64_t>> shapes = {{0}, {1}, {}, {3, 5}, {2, 0, 3}};
  run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
    for (int root = 0; root < size; ++root) {
      for (size_t k = 0; k < shapes.size(); ++k) {
        const size_t bytes = static_cast<size_t>(num_elements(shapes[k])) * dtype_size(dtype);
        std::vector<unsigned char> data = rank_bytes(rank, bytes);
        Tensor t{bytes ? data.data() : nullptr, dtype, shapes[k]};
        const std::string name = "b" + std::to_string(root) + "_" + std::to_string(k);
        Status s = rt.synchronize(rt.broadcast_async(name, t, root, {}));
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(data, rank_bytes(root, bytes))
            << "rank " << rank << " root " << root << " shape " << k;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Sizes, BroadcastEveryDtype,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5),
                                            ::testing::ValuesIn(kAllDtypes)));

TEST(Broadcast, ManyTensorsFromTwoRootsMixedWithAllreduce) {
  Config config = test_config();
  config.fusion_threshold = 256;  // several buckets per root
  run_runtimes(3, config, [&](Runtime& rt, int rank) {
    for (int step = 0; step < 3; ++step) {  // later steps take the response cache
      std::vector<std::vector<int32_t>> tensors(12, std::vector<int32_t>(20));
      std::vector<Handle> handles;
      for (size_t i = 0; i < tensors.size(); ++i) {
        for (size_t j = 0; j < tensors[i].size(); ++j) {
          tensors[i][j] = rank * 1000 + static_cast<int32_t>(i * 20 + j);
        }
        const int root = static_cast<int>(i % 2) * 2;  // roots 0 and 2
        handles.push_back(rt.broadcast_async(
            "t" + std::to_string(i), Tensor{tensors[i].data(), DType::kInt32, {4, 5}}, root, {}));
      }
      std::vector<float> sum(7, static_cast<float>(rank + 1));
      Handle reduce = rt.allreduce_async("sum", Tensor{sum.data(), DType::kFloat32, {7}},
                                         AllreduceOptions{ReduceOp::kSum});
      for (Handle h : handles) {
        Status s = rt.synchronize(h);
        ASSERT_TRUE(s.ok()) << s.message();
      }
      Status s = rt.synchronize(reduce);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(sum[0], 6.0f);
      for (size_t i = 0; i < tensors.size(); ++i) {
        const int root = static_cast<int>(i % 2) * 2;
        for (size_t j = 0; j < tensors[i].size(); ++j) {
          ASSERT_EQ(tensors[i][j], root * 1000 + static_cast<int32_t>(i * 20 + j))
              << "tensor " << i << " element " << j << " on rank " << rank;
        }
      }
    }
  });
}

// Every rank submits "b" built by `make(rank)`; all must fail with `code` and a message holding
// each of `expected`, and a later broadcast must still work.
void expect_broadcast_error(int size, const std::function<void(int, Tensor&, int&)>& make,
                            StatusCode code, const std::vector<std::string>& expected) {
  run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
    std::vector<double> storage(16, rank);
    Tensor t{storage.data(), DType::kFloat32, {2, 2}};
    int root = 0;
    make(rank, t, root);
    int callbacks = 0;
    Status from_callback;
    BroadcastOptions options{[&](const Status& s) {
      from_callback = s;
      ++callbacks;
    }};
    Status s = rt.synchronize(rt.broadcast_async("b", t, root, options));
    EXPECT_EQ(s.code(), code) << s.message();
    for (const std::string& e : expected) EXPECT_THAT(s.message(), HasSubstr(e));
    EXPECT_EQ(callbacks, 1);
    EXPECT_EQ(from_callback.message(), s.message());
    std::vector<int64_t> after(2, rank);
    Status ok = rt.synchronize(
        rt.broadcast_async("after", Tensor{after.data(), DType::kInt64, {2}}, size - 1, {}));
    ASSERT_TRUE(ok.ok()) << ok.message();
    EXPECT_EQ(after[1], size - 1);
  });
}

TEST(BroadcastErrors, ShapeMismatch) {
  expect_broadcast_error(3,
                         [](int rank, Tensor& t, int&) {
                           if (rank == 1) t.shape = {4};
                         },
                         StatusCode::kMismatch,
                         {"'b'", "shape: [2, 2] on ranks 0, 2 vs [4] on rank 1"});
}

TEST(BroadcastErrors, DtypeMismatch) {
  expect_broadcast_error(2,
                         [](int rank, Tensor& t, int&) {
                           if (rank == 0) t.dtype = DType::kInt32;
                         },
                         StatusCode::kMismatch,
                         {"'b'", "dtype: int32 on rank 0 vs float32 on rank 1"});
}

TEST(BroadcastErrors, RootMismatch) {
  expect_broadcast_error(4,
                         [](int rank, Tensor&, int& root) {
                           if (rank == 3) root = 2;
                         },
                         StatusCode::kMismatch,
                         {"'b'", "root rank: 0 on ranks 0, 1, 2 vs 2 on rank 3"});
}

TEST(BroadcastErrors, RootOutOfRangeOnOneRank) {
  expect_broadcast_error(3,
                         [](int rank, Tensor&, int& root) {
                           if (rank == 2) root = 7;
                         },
                         StatusCode::kMismatch,
                         {"'b'", "root rank: 0 on ranks 0, 1 vs 7 on rank 2"});
}

TEST(BroadcastErrors, RootNotARank) {
  for (int bad : {3, -1}) {
    expect_broadcast_error(3, [bad](int, Tensor&, int& root) { root = bad; },
                           StatusCode::kInvalidArgument,
                           {"'b'", "root rank " + std::to_string(bad), "3 ranks"});
  }
}

TEST(BroadcastErrors, BroadcastAgainstAllreduce) {
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> data(4, 1.0f);
    Tensor t{data.data(), DType::kFloat32, {4}};
    Handle h = rank == 0 ? rt.broadcast_async("x", t, 0, {}) : rt.allreduce_async("x", t, {});
    Status s = rt.synchronize(h);
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("collective: broadcast on rank 0 vs allreduce on rank 1"));
  });
}

TEST(BroadcastErrors, BadTensorsFailLocally) {
  run_runtimes(1, test_config(), [&](Runtime& rt, int) {
    Status s = rt.synchronize(rt.broadcast_async("", Tensor{nullptr, DType::kInt8, {0}}, 0, {}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("name must not be empty"));
    s = rt.synchronize(rt.broadcast_async("null", Tensor{nullptr, DType::kInt8, {3}}, 0, {}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("tensor 'null'"));
    EXPECT_THAT(s.message(), HasSubstr("data is null"));
    int8_t one = 1;
    s = rt.synchronize(rt.broadcast_async("neg", Tensor{&one, DType::kInt8, {-1}}, 0, {}));
    EXPECT_THAT(s.message(), HasSubstr("negative dimension"));
    s = rt.synchronize(
        rt.broadcast_async("dtype", Tensor{&one, static_cast<DType>(99), {1}}, 0, {}));
    EXPECT_THAT(s.message(), HasSubstr("unknown dtype 99"));
  });
}

// Integers are reduced exactly (reduce_ops_test.cc); their average is not, and is refused with
// a message that names the dtype and says what to do instead; bool takes min, max and product.
TEST(BroadcastErrors, AllreduceRefusesTheAverageOfIntegers) {
  run_runtimes(2, test_config(), [&](Runtime& rt, int) {
    for (DType dtype :
         {DType::kUInt8, DType::kInt8, DType::kInt16, DType::kInt32, DType::kInt64, DType::kBool}) {
      std::vector<int64_t> data(4, 1);
      Status s = rt.synchronize(
          rt.allreduce_async("ints", Tensor{data.data(), dtype, {4}}, AllreduceOptions{}));
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_THAT(s.message(), HasSubstr("tensor 'ints'"));
      if (dtype == DType::kBool) {
        EXPECT_THAT(s.message(), HasSubstr("allreduce of bool takes min (and), max (or)"));
      } else {
        EXPECT_THAT(s.message(), HasSubstr(std::string("the average of dtype ") +
                                           dtype_name(dtype) + " is not exact; reduce with sum"));
      }
    }
  });
}

TEST(BroadcastErrors, DuplicateNameInFlight) {
  std::atomic<bool> rank0_done{false};
  run_runtimes(2, test_config(), [&](Runtime& rt, int rank) {
    std::vector<float> a(3, static_cast<float>(rank)), b(3, 0.0f);
    // Rank 1 submits only after rank 0's second submission, so that one finds the first in flight.
    Handle first = 0;
    if (rank == 0) {
      first = rt.broadcast_async("d", Tensor{a.data(), DType::kFloat32, {3}}, 1, {});
      Handle second = rt.broadcast_async("d", Tensor{b.data(), DType::kFloat32, {3}}, 1, {});
      EXPECT_EQ(rt.synchronize(second).code(), StatusCode::kDuplicateName);
      rank0_done = true;
    } else {
      while (!rank0_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      first = rt.broadcast_async("d", Tensor{a.data(), DType::kFloat32, {3}}, 1, {});
    }
    Status s = rt.synchronize(first);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(a[2], 1.0f);
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
