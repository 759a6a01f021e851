// Process sets under mpirun (arcreduce::add_process_set): ops among the even and the odd ranks
// at once, every float dtype and integers, sizes 0, 1 and odd counts, broadcast roots given as
// ranks of the job, allgather in the set's order, compressed allreduce inside a set, and the
// errors: a rank outside the set, ranks that differ across ranks, bad lists, a removed set.
// References are computed here from the members' inputs. At 1 rank only the errors apply (the
// one possible set is every rank, set 0).
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mpi/runtime_test_util.h"

namespace arcreduce_test {
namespace {

using arcreduce::CollectiveOptions;
using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;

// The even and the odd ranks as two sets (the same on every rank), removed at the end of a test.
struct EvenOdd {
  std::vector<int> even, odd;
  int even_id = -1, odd_id = -1;
  EvenOdd() {
    for (int r = 0; r < arcreduce::size(); ++r) (r % 2 ? odd : even).push_back(r);
    even_id = arcreduce::add_process_set(even);
    odd_id = arcreduce::add_process_set(odd);
  }
  ~EvenOdd() {
    arcreduce::remove_process_set(odd_id);
    arcreduce::remove_process_set(even_id);
  }
  bool in_even() const { return arcreduce::rank() % 2 == 0; }
  int mine() const { return in_even() ? even_id : odd_id; }
  const std::vector<int>& my_ranks() const { return in_even() ? even : odd; }
};

bool throws_with(void (*call)(), const std::string& needle, std::string* message) {
  try {
    call();
  } catch (const arcreduce::Error& e) {
    *message = e.what();
    return message->find(needle) != std::string::npos;
  }
  *message = "(no exception)";
  return false;
}

TEST(ProcessSets, AllreduceAmongMembersEveryFloatDtypeAndCount) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (int64_t count : {0, 1, 17, 100001}) {
      TestTensor t(dtype, {count});
      fill_inputs(t, rank, count % 7);
      auto options = dense(ReduceOp::kSum);
      options.process_set = sets.mine();
      const std::string name = std::string("ps.") + short_name(dtype) + "." + std::to_string(count);
      const Status s = arcreduce::allreduce(name, t.view(), options);
      ASSERT_TRUE(s.ok()) << name << ": " << describe(s);
      for (int64_t i = 0; i < count; ++i) {
        double want = 0;
        for (int r : sets.my_ranks()) want += input_value(r, i, count % 7);
        ASSERT_EQ(t.get(i), want) << name << " element " << i;
      }
    }
  }
}

TEST(ProcessSets, IntegerSumAndMaxAmongMembers) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    std::vector<int64_t> v(9);
    for (size_t i = 0; i < v.size(); ++i) v[i] = (rank + 1) * 1000 + static_cast<int64_t>(i);
    auto options = dense(op);
    options.process_set = sets.mine();
    const std::string name = std::string("ps.int64.") + (op == ReduceOp::kSum ? "sum" : "max");
    const Status s = arcreduce::allreduce(name, view_of(v.data(), DType::kInt64, {9}), options);
    ASSERT_TRUE(s.ok()) << describe(s);
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t want = 0;
      for (int r : sets.my_ranks()) {
        const int64_t x = (r + 1) * 1000 + static_cast<int64_t>(i);
        want = op == ReduceOp::kSum ? want + x : std::max(want, x);
      }
      EXPECT_EQ(v[i], want) << name << " element " << i;
    }
  }
}

// The two sets' ops are in flight together with an op of every rank: none waits for another
// set, and the global op still sums over every rank.
TEST(ProcessSets, SetsAndTheWholeJobInFlightTogether) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  std::vector<float> in_set(1000, static_cast<float>(rank + 1)), all(1000, 1.0f);
  for (int step = 0; step < 3; ++step) {  // repeated: the response caches are used
    std::fill(in_set.begin(), in_set.end(), static_cast<float>(rank + 1));
    std::fill(all.begin(), all.end(), 1.0f);
    auto set_options = dense(ReduceOp::kSum);
    set_options.process_set = sets.mine();
    const Handle a = arcreduce::allreduce_async(
        "ps.together", view_of(in_set.data(), DType::kFloat32, {1000}), set_options);
    const Handle b = arcreduce::allreduce_async(
        "ps.together", view_of(all.data(), DType::kFloat32, {1000}), dense(ReduceOp::kSum));
    ASSERT_TRUE(arcreduce::synchronize(b).ok());
    ASSERT_TRUE(arcreduce::synchronize(a).ok());
    float want = 0;
    for (int r : sets.my_ranks()) want += static_cast<float>(r + 1);
    EXPECT_EQ(in_set[999], want);
    EXPECT_EQ(all[0], static_cast<float>(arcreduce::size()));
  }
}

TEST(ProcessSets, BroadcastRootIsARankOfTheJob) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  arcreduce::BroadcastOptions options;
  options.process_set = sets.mine();
  for (int root : sets.my_ranks()) {
    std::vector<int32_t> v(7, rank * 10);
    const Status s = arcreduce::broadcast("ps.bcast." + std::to_string(root),
                                          view_of(v.data(), DType::kInt32, {7}), root, options);
    ASSERT_TRUE(s.ok()) << describe(s);
    EXPECT_EQ(v[6], root * 10) << "root " << root;
  }
  // A root outside the set fails on every member, naming the set.
  const int outsider = sets.in_even() ? 1 : 0;
  std::vector<int32_t> v(3, rank);
  const Status s = arcreduce::broadcast("ps.bcast.outsider", view_of(v.data(), DType::kInt32, {3}),
                                        outsider, options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << describe(s);
  EXPECT_NE(s.message().find("is not in process set"), std::string::npos) << s.message();
  EXPECT_EQ(v[0], rank);
}

TEST(ProcessSets, AllgatherInTheSetsOrder) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  const int set_rank = arcreduce::process_set_rank(sets.mine());
  ASSERT_EQ(set_rank, rank / 2);
  // Set rank k contributes k + 1 rows of 2, holding its rank of the job.
  std::vector<int64_t> mine(2 * static_cast<size_t>(set_rank + 1), rank);
  std::vector<int64_t> out;
  std::vector<int64_t> rows;
  CollectiveOptions options;
  options.process_set = sets.mine();
  options.allocate = [&](const std::vector<int64_t>& shape, const std::vector<int64_t>& r) {
    out.resize(static_cast<size_t>(shape[0] * shape[1]));
    rows = r;
    return static_cast<void*>(out.data());
  };
  const Handle h = arcreduce::allgather_async(
      "ps.gather", view_of(mine.data(), DType::kInt64, {set_rank + 1, 2}), options);
  const Status s = arcreduce::synchronize(h);
  ASSERT_TRUE(s.ok()) << describe(s);
  std::vector<int64_t> want, want_rows;
  for (size_t k = 0; k < sets.my_ranks().size(); ++k) {
    want_rows.push_back(static_cast<int64_t>(k) + 1);
    want.insert(want.end(), 2 * (k + 1), sets.my_ranks()[k]);
  }
  EXPECT_EQ(rows, want_rows);
  EXPECT_EQ(out, want);
}

// ARC-Top-K inside a set: the members end with identical values (a compressed result is an
// approximation; what must hold is that every replica agrees), the non-members untouched.
TEST(ProcessSets, CompressedAllreduceInsideASet) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int rank = arcreduce::rank();
  TestTensor t(DType::kFloat32, {64, 32});
  fill_inputs(t, rank, 3);
  arcreduce::AllreduceOptions options;
  options.op = ReduceOp::kAverage;
  options.compression.compressor = "arctopk";
  options.compression.ratio = 0.25;
  options.process_set = sets.mine();
  for (int step = 0; step < 3; ++step) {
    const Status s = arcreduce::allreduce("ps.arctopk", t.view(), options);
    ASSERT_TRUE(s.ok()) << describe(s);
  }
  // Every member's tensor equals the set's first rank's: gather them inside the set.
  std::vector<float> all;
  CollectiveOptions gather;
  gather.process_set = sets.mine();
  gather.allocate = [&](const std::vector<int64_t>& shape, const std::vector<int64_t>&) {
    all.resize(static_cast<size_t>(shape[0] * shape[1]));
    return static_cast<void*>(all.data());
  };
  ASSERT_TRUE(
      arcreduce::synchronize(arcreduce::allgather_async("ps.arctopk.check", t.view(), gather))
          .ok());
  const size_t n = static_cast<size_t>(t.count());
  for (size_t k = 1; k < sets.my_ranks().size(); ++k) {
    EXPECT_TRUE(std::equal(all.begin(), all.begin() + n, all.begin() + k * n))
        << "member " << k << " differs from member 0";
  }
  EXPECT_GT(arcreduce::stats(sets.mine()).ops_completed, 0u);
  const int other = sets.in_even() ? sets.odd_id : sets.even_id;
  EXPECT_EQ(arcreduce::stats(other).ops_completed, 0u);  // not a member: zeros
}

TEST(ProcessSets, RankOutsideTheSetIsRefusedAtOnce) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  EvenOdd sets;
  const int other = sets.in_even() ? sets.odd_id : sets.even_id;
  float x = 1;
  auto options = dense();
  options.process_set = other;
  const Status s = arcreduce::allreduce("ps.outside", view_of(&x, DType::kFloat32, {1}), options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << describe(s);
  EXPECT_NE(s.message().find("rank " + std::to_string(arcreduce::rank()) +
                             " is not in process set " + std::to_string(other)),
            std::string::npos)
      << s.message();
  EXPECT_EQ(arcreduce::process_set_rank(other), -1);
}

TEST(ProcessSets, RemovedSetRefusesLaterOps) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<int> first{0};
  const int id = arcreduce::add_process_set(first);
  const std::vector<int> ids = arcreduce::process_set_ids();
  EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end());
  arcreduce::remove_process_set(id);
  float x = 1;
  auto options = dense();
  options.process_set = id;
  const Status s = arcreduce::allreduce("ps.removed", view_of(&x, DType::kFloat32, {1}), options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << describe(s);
  EXPECT_NE(s.message().find("unknown process set"), std::string::npos) << s.message();
  EXPECT_THROW(arcreduce::remove_process_set(id), arcreduce::Error);
  EXPECT_THROW(arcreduce::remove_process_set(0), arcreduce::Error);
  // The same ranks may form a set again, under a new id.
  const int again = arcreduce::add_process_set(first);
  EXPECT_GT(again, id);
  arcreduce::remove_process_set(again);
}

// Bad lists throw on every rank (no rank is left waiting in the set's creation).
TEST(ProcessSets, BadRanksThrowOnEveryRank) {
  std::string message;
  EXPECT_TRUE(throws_with([] { arcreduce::add_process_set({}); }, "at least one rank", &message))
      << message;
  EXPECT_TRUE(throws_with([] { arcreduce::add_process_set({arcreduce::size()}); },
                          "is not a rank of the job", &message))
      << message;
  EXPECT_TRUE(throws_with(
      [] {
        arcreduce::add_process_set({0, 0});
      },
      "listed twice", &message))
      << message;
  EXPECT_TRUE(throws_with(
      [] {
        std::vector<int> all;
        for (int r = 0; r < arcreduce::size(); ++r) all.push_back(r);
        arcreduce::add_process_set(all);
      },
      "process set 0", &message))
      << message;
  // The job goes on: an op of every rank still completes.
  float x = 1;
  EXPECT_TRUE(
      arcreduce::allreduce("ps.after_bad", view_of(&x, DType::kFloat32, {1}), dense(ReduceOp::kSum))
          .ok());
  EXPECT_EQ(x, static_cast<float>(arcreduce::size()));
}

TEST(ProcessSets, RanksThatDifferAcrossRanksThrowEverywhere) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::string message;
  EXPECT_TRUE(throws_with(
      [] {
        // Rank 0 asks for {0}, the others for {1}.
        arcreduce::add_process_set(arcreduce::rank() == 0 ? std::vector<int>{0}
                                                          : std::vector<int>{1});
      },
      "passed other ranks than rank 0", &message))
      << message;
  // One rank's bad list fails every rank, naming it.
  EXPECT_TRUE(throws_with(
      [] {
        arcreduce::add_process_set(arcreduce::rank() == 1 ? std::vector<int>{-1}
                                                          : std::vector<int>{0});
      },
      "refused on rank [1]", &message))
      << message;
  // A set of the same ranks as an existing one is refused, naming it.
  const int id = arcreduce::add_process_set({0});
  EXPECT_TRUE(
      throws_with([] { arcreduce::add_process_set({0}); }, "has these ranks already", &message))
      << message;
  arcreduce::remove_process_set(id);
}

}  // namespace
}  // namespace arcreduce_test
