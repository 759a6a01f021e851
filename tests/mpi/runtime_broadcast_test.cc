// arcreduce::broadcast under mpirun: every dtype, every root, element counts 0, 1, 7 and 100000,
// many tensors in flight with several roots (repeated, so the response cache is used), and the
// errors (root differs across ranks, root not a rank of the job), after which the job goes on.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mpi/runtime_test_util.h"

namespace arcreduce_test {
namespace {

using arcreduce::Handle;
using arcreduce::Status;
using arcreduce::StatusCode;

constexpr DType kEveryDType[] = {
    DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kUInt8,
    DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kBool};

// Bytes that differ per rank and position: equal to root's only if they came from root.
std::vector<unsigned char> bytes_of(int rank, size_t n, int salt) {
  std::vector<unsigned char> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<unsigned char>(rank * 53 + i * 7 + salt);
  return b;
}

TEST(Broadcast, EveryDtypeEveryRootAndCount) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  for (DType dtype : kEveryDType) {
    for (int64_t count : {0, 1, 7, 100000}) {
      for (int root = 0; root < size; ++root) {
        const size_t n = static_cast<size_t>(count) * arcreduce::dtype_size(dtype);
        std::vector<unsigned char> data = bytes_of(rank, n, static_cast<int>(dtype));
        const std::string name = std::string("bcast/") + arcreduce::dtype_name(dtype) + "/" +
                                 std::to_string(count) + "/" + std::to_string(root);
        Status s =
            arcreduce::broadcast(name, view_of(n ? data.data() : nullptr, dtype, {count}), root);
        EXPECT_TRUE(s.ok()) << name << ": " << describe(s);
        EXPECT_TRUE(data == bytes_of(root, n, static_cast<int>(dtype))) << name;
      }
    }
  }
}

TEST(Broadcast, ManyInFlightFromSeveralRoots) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<int64_t>> tensors(16, std::vector<int64_t>(33));
    std::vector<Handle> handles;
    for (size_t i = 0; i < tensors.size(); ++i) {
      for (size_t j = 0; j < tensors[i].size(); ++j) tensors[i][j] = rank * 100000 + i * 100 + j;
      const int root = static_cast<int>(i) % size;
      handles.push_back(arcreduce::broadcast_async(
          "many/" + std::to_string(i), view_of(tensors[i].data(), DType::kInt64, {3, 11}), root));
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      Status s = arcreduce::synchronize(handles[i]);
      EXPECT_TRUE(s.ok()) << describe(s);
      const int root = static_cast<int>(i) % size;
      for (size_t j = 0; j < tensors[i].size(); ++j) {
        EXPECT_EQ(tensors[i][j], static_cast<int64_t>(root * 100000 + i * 100 + j))
            << "tensor " << i << " step " << step;
      }
    }
  }
}

TEST(BroadcastErrors, RootDiffersOnLastRank) {
  const int rank = arcreduce::rank();
  const int size = arcreduce::size();
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<float> data(5, static_cast<float>(rank));
  const int root = rank == size - 1 ? 1 : 0;
  Status s = arcreduce::broadcast("root_differs", view_of(data.data(), DType::kFloat32, {5}), root);
  EXPECT_EQ(s.code(), StatusCode::kMismatch) << describe(s);
  EXPECT_NE(s.message().find("'root_differs'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("root rank"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("on rank " + std::to_string(size - 1)), std::string::npos)
      << s.message();
}

TEST(BroadcastErrors, RootNotARankOfTheJob) {
  const int size = arcreduce::size();
  std::vector<int32_t> data(2, 1);
  for (int bad : {size, -1}) {
    Status s = arcreduce::broadcast("bad_root", view_of(data.data(), DType::kInt32, {2}), bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << describe(s);
    EXPECT_NE(s.message().find("'bad_root'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("root rank " + std::to_string(bad)), std::string::npos)
        << s.message();
  }
  // The job goes on.
  data.assign(2, arcreduce::rank());
  Status s = arcreduce::broadcast("after_bad_root", view_of(data.data(), DType::kInt32, {2}), 0);
  EXPECT_TRUE(s.ok()) << describe(s);
  EXPECT_EQ(data[1], 0);
}

}  // namespace
}  // namespace arcreduce_test
