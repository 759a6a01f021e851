// Correctness of arcreduce::allreduce under mpirun: every dtype, Sum and Average, element counts
// 0, 1, 7 and 100000, many tensors in flight submitted in a different random order on every
// rank, callbacks, poll(), several submitting threads, repeated steps (response cache) and name
// reuse. Results are checked against reference values computed here and must be bit-identical
// on all ranks. Fusion and cache settings come from the ARCREDUCE_* variables of the CTest entry.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mpi/runtime_test_util.h"

namespace arcreduce_test {
namespace {

using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;

constexpr DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                DType::kBFloat16};

std::vector<int64_t> shape_for(int64_t count) {
  if (count == 100000) return {100, 1000};  // 2-D, rows = 100
  return {count};
}

using Param = std::tuple<DType, ReduceOp, int64_t>;

class AllreduceParamTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllreduceParamTest, MatchesReference) {
  const auto [dtype, op, count] = GetParam();
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  const int salt = static_cast<int>(count % 5) + static_cast<int>(dtype) * 3;
  TestTensor t(dtype, shape_for(count));
  fill_inputs(t, rank, salt);
  const std::string name = std::string("param/") + short_name(dtype) + "/" +
                           arcreduce::reduce_op_name(op) + "/" + std::to_string(count);
  Status s = arcreduce::allreduce(name, t.view(), dense(op));
  EXPECT_TRUE(s.ok()) << name << ": " << describe(s);
  EXPECT_EQ(check_reduced(t, op, size, salt), "") << name;
  EXPECT_TRUE(same_on_all_ranks(t)) << name << " differs across ranks";
}

INSTANTIATE_TEST_SUITE_P(DTypeOpCount, AllreduceParamTest,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                                            ::testing::Values(ReduceOp::kSum, ReduceOp::kAverage),
                                            ::testing::Values<int64_t>(0, 1, 7, 100000)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(short_name(std::get<0>(info.param))) + "_" +
                                  arcreduce::reduce_op_name(std::get<1>(info.param)) + "_n" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(Allreduce, ScalarShape) {
  TestTensor t(DType::kFloat64, {});
  fill_inputs(t, arcreduce::rank(), 1);
  Status s = arcreduce::allreduce("scalar", t.view(), dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), 1), "");
}

TEST(Allreduce, ZeroElementsWithNullData) {
  arcreduce::Tensor view = view_of(nullptr, DType::kFloat32, {0});
  Status s = arcreduce::allreduce("zero/null", view, dense());
  EXPECT_TRUE(s.ok()) << "zero elements with null data is a valid empty tensor: " << describe(s);
  arcreduce::Tensor view2 = view_of(nullptr, DType::kFloat16, {4, 0});
  s = arcreduce::allreduce("zero/null2d", view2, dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << describe(s);
}

TEST(Allreduce, DefaultOptionsAverage) {
  // AllreduceOptions{} averages; with compressor "none" via the option only.
  TestTensor t(DType::kFloat32, {33});
  fill_inputs(t, arcreduce::rank(), 2);
  arcreduce::AllreduceOptions o;
  o.compression.compressor = "none";
  o.compression.error_feedback = "none";
  Status s = arcreduce::allreduce("default_op", t.view(), o);
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(t, ReduceOp::kAverage, arcreduce::size(), 2), "");
}

// 4 ranks averaging values near 60000 in fp16: a sum in fp16 would overflow (max 65504).
TEST(Allreduce, Float16AverageDoesNotOverflow) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  const int64_t n = 1000;
  TestTensor t(DType::kFloat16, {n});
  for (int64_t i = 0; i < n; ++i) t.set(i, 60000.0 + 32.0 * ((rank + i) % 4));
  Status s = arcreduce::allreduce("fp16/large", t.view(), dense(ReduceOp::kAverage));
  EXPECT_TRUE(s.ok()) << describe(s);
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < size; ++r) want += 60000.0 + 32.0 * ((r + i) % 4);
    want /= size;
    const double got = t.get(i);
    // fp16 spacing is 32 here; allow 2 ulps for pre-scaling and rounding.
    if (!(std::fabs(got - want) <= 64.0)) {
      if (!bad++)
        first = "element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
                std::to_string(want);
    }
  }
  EXPECT_EQ(bad, 0) << first;
  EXPECT_TRUE(same_on_all_ranks(t));
}

// Inputs that are not exactly summable (random values): the rounding then depends on the order
// of additions, and every rank must still end with the same bits, close to the exact result.
class RandomInputsTest : public ::testing::TestWithParam<DType> {};

TEST_P(RandomInputsTest, BitIdenticalOnAllRanksAndClose) {
  const DType dtype = GetParam();
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  const int64_t n = 100003;            // not a multiple of any world size
  auto value = [](int r, int64_t i) {  // splitmix64 of (r, i) mapped to [-1, 1)
    uint64_t z = static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  };
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    TestTensor t(dtype, {n});
    for (int64_t i = 0; i < n; ++i) t.set(i, value(rank, i));
    const std::string name =
        std::string("random/") + short_name(dtype) + "/" + arcreduce::reduce_op_name(op);
    Status s = arcreduce::allreduce(name, t.view(), dense(op));
    EXPECT_TRUE(s.ok()) << name << ": " << describe(s);
    EXPECT_TRUE(same_on_all_ranks(t)) << name << ": ranks hold different bits";
    int64_t bad = 0;
    std::string first;
    for (int64_t i = 0; i < n; ++i) {
      double want = 0;
      for (int r = 0; r < size; ++r) want += quantize(dtype, value(r, i));
      if (op == ReduceOp::kAverage) want /= size;
      // One rounding per addition (or per pre-scaling) of values up to |size|.
      const double tol = 2.0 * size * epsilon(dtype) * (op == ReduceOp::kSum ? size : 1.0);
      if (!(std::fabs(t.get(i) - want) <= tol)) {
        if (!bad++)
          first = "element " + std::to_string(i) + ": got " + std::to_string(t.get(i)) + ", want " +
                  std::to_string(want);
      }
    }
    EXPECT_EQ(bad, 0) << name << ": " << first;
  }
}

INSTANTIATE_TEST_SUITE_P(DTypes, RandomInputsTest, ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(short_name(info.param));
                         });

// One tensor larger than any fusion bucket of the test configurations, odd element count.
TEST(Allreduce, LargeTensor) {
  const int rank = arcreduce::rank();
  TestTensor t(DType::kFloat32, {3000001});
  fill_inputs(t, rank, 3);
  Status s = arcreduce::allreduce("large", t.view(), dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), 3), "");
  EXPECT_TRUE(same_on_all_ranks(t));
}

// One tensor of the "many" workload.
struct Item {
  std::string name;
  DType dtype;
  ReduceOp op;
  int64_t count;
  int salt;
  TestTensor tensor;
  Handle handle = 0;
  std::atomic<int> callbacks{0};
  std::atomic<bool> callback_on_caller_thread{false};
  Status callback_status;
};

std::vector<std::unique_ptr<Item>> make_items(const std::string& prefix, int n, int step) {
  static const int64_t kCounts[] = {0, 1, 7, 100, 1000, 3, 257, 4096};
  std::vector<std::unique_ptr<Item>> items;
  for (int i = 0; i < n; ++i) {
    auto it = std::make_unique<Item>();
    it->name = prefix + "/t" + std::to_string(i);
    it->dtype = kAllDTypes[i % 4];
    it->op = (i / 4) % 2 ? ReduceOp::kSum : ReduceOp::kAverage;
    it->count = (i == 5 || i == 18) ? 100000 : kCounts[(i * 3) % 8];
    it->salt = i + step * 7;
    it->tensor = TestTensor(it->dtype, shape_for(it->count));
    items.push_back(std::move(it));
  }
  return items;
}

std::vector<int> shuffled(int n, uint64_t seed) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// Submits `items` in a rank-specific random order (with small random pauses so submissions
// spread over several coordinator cycles), then waits for them in another random order.
void run_step(std::vector<std::unique_ptr<Item>>& items, int step, bool with_callbacks) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  const int n = static_cast<int>(items.size());
  std::mt19937_64 rng(1000003ull * rank + 7919ull * step + 17);
  const auto main_thread = std::this_thread::get_id();
  for (int i : shuffled(n, rng())) {
    Item& it = *items[i];
    fill_inputs(it.tensor, rank, it.salt);
    arcreduce::AllreduceOptions o = dense(it.op);
    if (with_callbacks) {
      Item* p = &it;
      o.callback = [p, main_thread](const Status& s) {
        p->callback_status = s;
        if (std::this_thread::get_id() == main_thread) p->callback_on_caller_thread = true;
        p->callbacks.fetch_add(1);
      };
    }
    it.handle = arcreduce::allreduce_async(it.name, it.tensor.view(), o);
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
  }
  if (with_callbacks) {
    // Wait through poll() only, then synchronize() must return at once with the same status.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (auto& it : items) {
      while (!arcreduce::poll(it->handle) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
  }
  for (int i : shuffled(n, rng())) {
    Item& it = *items[i];
    Status s = arcreduce::synchronize(it.handle);
    EXPECT_TRUE(s.ok()) << it.name << ": " << describe(s);
  }
  for (auto& p : items) {
    Item& it = *p;
    EXPECT_EQ(check_reduced(it.tensor, it.op, size, it.salt), "")
        << it.name << " (" << short_name(it.dtype) << ", " << arcreduce::reduce_op_name(it.op)
        << ", " << it.count << " elements, step " << step << ")";
    if (with_callbacks) {
      EXPECT_EQ(it.callbacks.load(), 1) << it.name << ": callback must fire exactly once";
      EXPECT_TRUE(it.callback_status.ok()) << it.name << ": " << describe(it.callback_status);
      EXPECT_FALSE(it.callback_on_caller_thread.load())
          << it.name << ": callback of a successful reduction must run on the coordinator";
      it.callbacks = 0;
    }
    EXPECT_TRUE(same_on_all_ranks(it.tensor)) << it.name << " differs across ranks";
  }
}

TEST(AllreduceMany, RandomOrderAsyncThenSynchronize) {
  auto items = make_items("many_sync", 48, 0);
  for (int step = 0; step < 4; ++step) run_step(items, step, /*with_callbacks=*/false);
}

TEST(AllreduceMany, RandomOrderWithCallbacksAndPoll) {
  auto items = make_items("many_cb", 40, 0);
  for (int step = 0; step < 3; ++step) run_step(items, step, /*with_callbacks=*/true);
}

// Every step uses fresh names (no cache hits possible) while the previous step's names retire.
TEST(AllreduceMany, FreshNamesEveryStep) {
  for (int step = 0; step < 3; ++step) {
    auto items = make_items("fresh" + std::to_string(step), 24, step);
    run_step(items, step, /*with_callbacks=*/false);
  }
}

TEST(AllreduceMany, ConcurrentSubmittingThreads) {
  constexpr int kThreads = 3;
  constexpr int kPerThread = 16;
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  std::vector<std::vector<std::unique_ptr<Item>>> sets;
  for (int t = 0; t < kThreads; ++t) {
    sets.push_back(make_items("threads/" + std::to_string(t), kPerThread, t));
  }
  std::vector<std::vector<Status>> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& items = sets[t];
      std::mt19937_64 rng(rank * 31 + t);
      for (int i : shuffled(kPerThread, rng())) {
        Item& it = *items[i];
        fill_inputs(it.tensor, rank, it.salt);
        it.handle = arcreduce::allreduce_async(it.name, it.tensor.view(), dense(it.op));
      }
      for (auto& it : items) results[t].push_back(arcreduce::synchronize(it->handle));
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const Item& it = *sets[t][i];
      EXPECT_TRUE(results[t][i].ok()) << it.name << ": " << describe(results[t][i]);
      EXPECT_EQ(check_reduced(it.tensor, it.op, size, it.salt), "") << it.name;
    }
  }
}

// After steady-state steps (response cache warm), the same name is reused with a new shape and
// dtype on every rank: this is a new, consistent tensor, not a mismatch.
TEST(Allreduce, NameReusedWithNewShapeOnAllRanks) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  for (int step = 0; step < 3; ++step) {
    TestTensor t(DType::kFloat32, {16});
    fill_inputs(t, rank, step);
    Status s = arcreduce::allreduce("reused", t.view(), dense(ReduceOp::kSum));
    EXPECT_TRUE(s.ok()) << describe(s);
    EXPECT_EQ(check_reduced(t, ReduceOp::kSum, size, step), "") << "step " << step;
  }
  TestTensor t(DType::kFloat64, {5, 3});
  fill_inputs(t, rank, 9);
  Status s = arcreduce::allreduce("reused", t.view(), dense(ReduceOp::kAverage));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(t, ReduceOp::kAverage, size, 9), "");
}

// Hundreds of small tensors in flight at once, each rank in its own order.
TEST(AllreduceMany, HundredsOfSmallTensors) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  constexpr int kN = 400;
  std::vector<TestTensor> ts;
  std::vector<Handle> hs(kN);
  for (int i = 0; i < kN; ++i) ts.emplace_back(kAllDTypes[i % 4], std::vector<int64_t>{1 + i % 13});
  for (int step = 0; step < 2; ++step) {
    for (int i : shuffled(kN, 77 * rank + step)) {
      fill_inputs(ts[i], rank, i + step);
      hs[i] = arcreduce::allreduce_async("small/" + std::to_string(i), ts[i].view(),
                                         dense(ReduceOp::kSum));
    }
    for (int i = 0; i < kN; ++i) {
      Status s = arcreduce::synchronize(hs[i]);
      EXPECT_TRUE(s.ok()) << i << ": " << describe(s);
      EXPECT_EQ(check_reduced(ts[i], ReduceOp::kSum, size, i + step), "") << "small/" << i;
    }
  }
}

// A callback that throws is contained: the op still succeeds and the runtime keeps working.
TEST(AllreduceCallback, ThrowingCallbackIsContained) {
  TestTensor t(DType::kFloat32, {9});
  fill_inputs(t, arcreduce::rank(), 6);
  std::atomic<int> calls{0};
  arcreduce::AllreduceOptions o = dense(ReduceOp::kSum);
  o.callback = [&calls](const Status&) {
    calls.fetch_add(1);
    throw std::runtime_error("callback failure on purpose");
  };
  Status s = arcreduce::synchronize(arcreduce::allreduce_async("cb_throws", t.view(), o));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), 6), "");
  TestTensor u(DType::kFloat64, {9});
  fill_inputs(u, arcreduce::rank(), 7);
  s = arcreduce::allreduce("cb_throws_after", u.view(), dense(ReduceOp::kSum));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(u, ReduceOp::kSum, arcreduce::size(), 7), "");
}

// Chaining: a callback (on the coordinator thread) submits the next op.
TEST(AllreduceCallback, CallbackMaySubmitAnotherOp) {
  const int rank = arcreduce::rank();
  TestTensor a(DType::kFloat32, {12}), b(DType::kBFloat16, {12});
  fill_inputs(a, rank, 1);
  fill_inputs(b, rank, 2);
  std::atomic<Handle> second{0};
  std::atomic<bool> submitted{false};
  arcreduce::AllreduceOptions o = dense(ReduceOp::kSum);
  o.callback = [&](const Status&) {
    second = arcreduce::allreduce_async("chain/b", b.view(), dense(ReduceOp::kSum));
    submitted = true;
  };
  Status s = arcreduce::synchronize(arcreduce::allreduce_async("chain/a", a.view(), o));
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_TRUE(submitted.load()) << "synchronize returned before the callback finished";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!submitted.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  s = arcreduce::synchronize(second.load());
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(check_reduced(a, ReduceOp::kSum, arcreduce::size(), 1), "");
  EXPECT_EQ(check_reduced(b, ReduceOp::kSum, arcreduce::size(), 2), "");
}

TEST(AllreduceHandles, UnknownHandleCountsAsComplete) {
  const Handle unknown = 0xfeedfacecafeull;
  EXPECT_TRUE(arcreduce::poll(unknown));
  (void)arcreduce::synchronize(unknown);  // must return, whatever the status
  // A released handle is unknown afterwards.
  TestTensor t(DType::kFloat32, {3});
  Handle h = arcreduce::allreduce_async("released", t.view(), dense());
  EXPECT_TRUE(arcreduce::synchronize(h).ok());
  EXPECT_TRUE(arcreduce::poll(h));
}

// The harness itself: a failure on one rank must fail the job with that rank named. Run only
// by the runtime_harness_self_check test (--gtest_also_run_disabled_tests).
TEST(DISABLED_HarnessSelfCheck, FailsOnLastRank) {
  EXPECT_NE(arcreduce::rank(), arcreduce::size() - 1) << "deliberate failure";
}

}  // namespace
}  // namespace arcreduce_test
