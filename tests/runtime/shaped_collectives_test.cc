// allgather, alltoall and reducescatter through the runtime over the loopback world, at 1-4
// ranks, against results built here element by element; their errors on every rank.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// An allocator into `out`, recording the shape and rows it was given.
struct Output {
  std::vector<int64_t> data;  // int64 elements (tests use kInt64 or reinterpret)
  std::vector<int64_t> shape, rows;
  OutputAllocator allocator() {
    return [this](const std::vector<int64_t>& s, const std::vector<int64_t>& r) -> void* {
      shape = s;
      rows = r;
      data.assign(static_cast<size_t>(num_elements(s)) + 1, -1);  // +1: never null
      return data.data();
    };
  }
};

// Row i of rank r's tensor, column c: a value that names all three.
int64_t cell(int r, int64_t i, int64_t c) {
  return 1000000 * (r + 1) + 1000 * i + c;
}

TEST(Allgather, FirstDimensionsOfEveryRankInRankOrder) {
  for (int size : {1, 2, 3, 4}) {
    for (int round = 0; round < 3; ++round) {  // the same name again: nothing cached
      run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
        const int64_t cols = 3;
        const int64_t mine = (rank + round) % 3;  // 0, 1 or 2 rows: sizes differ across ranks
        std::vector<int64_t> in(static_cast<size_t>(mine * cols));
        for (int64_t i = 0; i < mine; ++i) {
          for (int64_t c = 0; c < cols; ++c) in[i * cols + c] = cell(rank, i, c);
        }
        Output out;
        CollectiveOptions options;
        options.allocate = out.allocator();
        Status s = rt.synchronize(rt.shaped_async(
            "g", Tensor{in.data(), DType::kInt64, {mine, cols}}, options, Collective::kAllgather));
        ASSERT_TRUE(s.ok()) << s.message();
        std::vector<int64_t> expected, rows;
        for (int r = 0; r < size; ++r) {
          const int64_t n = (r + round) % 3;
          rows.push_back(n);
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t c = 0; c < cols; ++c) expected.push_back(cell(r, i, c));
          }
        }
        EXPECT_THAT(out.rows, ElementsAreArray(rows));
        EXPECT_THAT(out.shape, ElementsAreArray(
                                   {std::accumulate(rows.begin(), rows.end(), int64_t{0}), cols}));
        out.data.pop_back();
        EXPECT_EQ(out.data, expected) << "size " << size << " rank " << rank;
      });
    }
  }
}

TEST(Allgather, EveryDtypeMovesBytes) {
  const std::vector<DType> dtypes = {
      DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kUInt8,
      DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kBool};
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    for (DType dtype : dtypes) {
      const size_t n = dtype_size(dtype) * static_cast<size_t>(rank + 1);
      std::vector<uint8_t> in(n, static_cast<uint8_t>(rank == 0 ? 0 : 1));
      std::vector<uint8_t> out;
      CollectiveOptions options;
      options.allocate = [&](const std::vector<int64_t>& s, const std::vector<int64_t>&) {
        out.assign(static_cast<size_t>(num_elements(s)) * dtype_size(dtype), 9);
        return static_cast<void*>(out.data());
      };
      Status s = rt.synchronize(rt.shaped_async(std::string("d.") + dtype_name(dtype),
                                                Tensor{in.data(), dtype, {rank + 1}}, options,
                                                Collective::kAllgather));
      ASSERT_TRUE(s.ok()) << s.message();
      std::vector<uint8_t> expected;
      for (int r = 0; r < 3; ++r) {
        expected.insert(expected.end(), dtype_size(dtype) * (r + 1), r == 0 ? 0 : 1);
      }
      EXPECT_EQ(out, expected) << dtype_name(dtype);
    }
  });
}

TEST(Alltoall, SplitsSendEachRankItsRows) {
  for (int size : {1, 2, 3, 4}) {
    run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
      // Rank r sends (r + j) % 3 rows to rank j; row k of what goes to j is cell(r, j, k).
      std::vector<int64_t> splits, in;
      for (int j = 0; j < size; ++j) {
        splits.push_back((rank + j) % 3);
        for (int64_t k = 0; k < splits.back(); ++k) in.push_back(cell(rank, j, k));
      }
      Output out;
      CollectiveOptions options;
      options.allocate = out.allocator();
      options.splits = splits;
      Status s = rt.synchronize(
          rt.shaped_async("a", Tensor{in.data(), DType::kInt64, {static_cast<int64_t>(in.size())}},
                          options, Collective::kAlltoall));
      ASSERT_TRUE(s.ok()) << s.message();
      std::vector<int64_t> expected, rows;
      for (int r = 0; r < size; ++r) {
        rows.push_back((r + rank) % 3);
        for (int64_t k = 0; k < rows.back(); ++k) expected.push_back(cell(r, rank, k));
      }
      EXPECT_THAT(out.rows, ElementsAreArray(rows));
      out.data.pop_back();
      EXPECT_EQ(out.data, expected) << "size " << size << " rank " << rank;
    });
  }
}

TEST(Alltoall, WithoutSplitsEqualShares) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    std::vector<int64_t> in;
    for (int j = 0; j < 3; ++j) {
      for (int64_t k = 0; k < 2; ++k) in.push_back(cell(rank, j, k));
    }
    Output out;
    CollectiveOptions options;
    options.allocate = out.allocator();
    ASSERT_TRUE(rt.synchronize(rt.shaped_async("e", Tensor{in.data(), DType::kInt64, {3, 2}},
                                               options, Collective::kAlltoall))
                    .ok());
    std::vector<int64_t> expected;
    for (int r = 0; r < 3; ++r) {
      for (int64_t k = 0; k < 2; ++k) expected.push_back(cell(r, rank, k));
    }
    EXPECT_THAT(out.shape, ElementsAreArray({3, 2}));
    out.data.pop_back();
    EXPECT_EQ(out.data, expected);
  });
}

TEST(Reducescatter, EachRankKeepsItsBlockOfTheReduction) {
  for (int size : {1, 2, 3, 4}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMax}) {
      run_runtimes(size, test_config(), [&](Runtime& rt, int rank) {
        const int64_t n = 7, cols = 2;  // 7 rows: uneven blocks at 2, 3 and 4 ranks
        std::vector<double> in(n * cols);
        for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<double>(i * (rank + 1));
        std::vector<double> out;
        std::vector<int64_t> rows;
        CollectiveOptions options;
        options.op = op;
        options.allocate = [&](const std::vector<int64_t>& s, const std::vector<int64_t>& r) {
          rows = r;
          out.assign(static_cast<size_t>(num_elements(s)) + 1, -1);
          return static_cast<void*>(out.data());
        };
        Status s =
            rt.synchronize(rt.shaped_async("rs", Tensor{in.data(), DType::kFloat64, {n, cols}},
                                           options, Collective::kReducescatter));
        ASSERT_TRUE(s.ok()) << s.message();
        int64_t first = 0;
        for (int r = 0; r < size; ++r) {
          EXPECT_EQ(rows[r], n / size + (r < n % size ? 1 : 0));
          if (r < rank) first += rows[r];
        }
        out.pop_back();
        ASSERT_EQ(out.size(), static_cast<size_t>(rows[rank] * cols));
        const double ranks_sum = size * (size + 1) / 2.0;
        for (size_t i = 0; i < out.size(); ++i) {
          const double x = static_cast<double>(first * cols + static_cast<int64_t>(i));
          const double expected = op == ReduceOp::kSum       ? x * ranks_sum
                                  : op == ReduceOp::kAverage ? x * ranks_sum / size
                                                             : x * size;
          EXPECT_DOUBLE_EQ(out[i], expected) << "size " << size << " rank " << rank;
        }
      });
    }
  }
}

TEST(ShapedCollectives, ErrorsReachEveryRank) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    std::vector<int64_t> in(12, rank);
    Output out;
    CollectiveOptions options;
    options.allocate = out.allocator();
    // Trailing dimensions differ on rank 2.
    const std::vector<int64_t> shape =
        rank == 2 ? std::vector<int64_t>{3, 4} : std::vector<int64_t>{4, 3};
    Status s = rt.synchronize(rt.shaped_async("m", Tensor{in.data(), DType::kInt64, shape}, options,
                                              Collective::kAllgather));
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("[*, 3] on ranks 0, 1 vs [*, 4] on rank 2"));
    // Bad splits on rank 1: refused there, and the others' op fails with its reason.
    CollectiveOptions split = options;
    split.splits = rank == 1 ? std::vector<int64_t>{5, 5, 5} : std::vector<int64_t>{4, 4, 4};
    s = rt.synchronize(
        rt.shaped_async("s", Tensor{in.data(), DType::kInt64, {12}}, split, Collective::kAlltoall));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
    EXPECT_THAT(s.message(), HasSubstr("alltoall splits sum to 15, not the first dimension 12"));
    // An integer average is refused for reducescatter as for allreduce.
    CollectiveOptions average = options;
    average.op = ReduceOp::kAverage;
    s = rt.synchronize(rt.shaped_async("avg", Tensor{in.data(), DType::kInt64, {12}}, average,
                                       Collective::kReducescatter));
    EXPECT_THAT(s.message(), HasSubstr("not exact"));
    // A scalar has no first dimension; a missing allocator is refused.
    int64_t scalar = 1;
    s = rt.synchronize(
        rt.shaped_async("sc", Tensor{&scalar, DType::kInt64, {}}, options, Collective::kAllgather));
    EXPECT_THAT(s.message(), HasSubstr("a scalar has none"));
    s = rt.synchronize(rt.shaped_async("na", Tensor{in.data(), DType::kInt64, {12}},
                                       CollectiveOptions{}, Collective::kAllgather));
    EXPECT_THAT(s.message(), HasSubstr("needs an output allocator"));
    // A last op every rank takes part in: a rank whose ops were all refused locally would
    // otherwise shut down before its refusals reached the others (who then see kShutdown).
    Output after;
    options.allocate = after.allocator();
    EXPECT_TRUE(rt.synchronize(rt.shaped_async("after", Tensor{in.data(), DType::kInt64, {12}},
                                               options, Collective::kAllgather))
                    .ok());
  });
}

TEST(ShapedCollectives, AFailingAllocatorFailsOnlyItsRank) {
  run_runtimes(3, test_config(), [&](Runtime& rt, int rank) {
    std::vector<int64_t> in(4, rank);
    Output out;
    CollectiveOptions options;
    options.allocate = out.allocator();
    if (rank == 1) {
      options.allocate = [](const std::vector<int64_t>&, const std::vector<int64_t>&) -> void* {
        throw std::runtime_error("out of memory");
      };
    }
    Status s = rt.synchronize(rt.shaped_async("f", Tensor{in.data(), DType::kInt64, {4}}, options,
                                              Collective::kAllgather));
    if (rank == 1) {
      EXPECT_EQ(s.code(), StatusCode::kInternal);
      EXPECT_THAT(s.message(), HasSubstr("'f': the output allocator threw: out of memory"));
    } else {
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(out.data[4], 1);  // rank 1's block
    }
    // The job goes on.
    Output next;
    options.allocate = next.allocator();
    EXPECT_TRUE(rt.synchronize(rt.shaped_async("after", Tensor{in.data(), DType::kInt64, {4}},
                                               options, Collective::kAllgather))
                    .ok());
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
