#include <gtest/gtest.h>

#include "tensor_queue/fusion.h"

namespace arcreduce {
namespace {

TensorSignature sig(int64_t elements, DType dtype = DType::kFloat32,
                    ReduceOp op = ReduceOp::kAverage, const std::string& compressor = "none") {
  TensorSignature s;
  s.dtype = dtype;
  s.shape = {elements};
  s.op = op;
  s.compression.compressor = compressor;
  return s;
}

std::vector<std::vector<size_t>> members(const std::vector<Bucket>& buckets) {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets) out.push_back(b.members);
  return out;
}

TEST(PlanBuckets, Empty) {
  EXPECT_TRUE(plan_buckets({}, 1024).empty());
}

TEST(PlanBuckets, FusesUpToTheThreshold) {
  // 4-byte elements: 100 + 100 fit in 1000 bytes, the third does not.
  auto b = plan_buckets({sig(100), sig(100), sig(100), sig(10)}, 1000);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0, 1, 3}, {2}}));
  EXPECT_EQ(b[0].bytes, 840u);
  EXPECT_EQ(b[1].bytes, 400u);
}

TEST(PlanBuckets, ThresholdZeroDisablesFusion) {
  auto b = plan_buckets({sig(1), sig(1), sig(1)}, 0);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0}, {1}, {2}}));
}

TEST(PlanBuckets, OversizedTensorGetsItsOwnBucket) {
  auto b = plan_buckets({sig(10), sig(1000), sig(10)}, 100);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
}

TEST(PlanBuckets, OnlyEqualKeysFuse) {
  auto b = plan_buckets(
      {sig(1), sig(1, DType::kFloat64), sig(1, DType::kFloat32, ReduceOp::kSum),
       sig(1, DType::kFloat32, ReduceOp::kAverage, "topk"), sig(1), sig(1, DType::kFloat64)},
      1 << 20);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0, 4}, {1, 5}, {2}, {3}}));
}

TEST(PlanBuckets, BroadcastsFuseOnlyWithBroadcastsOfTheSameRoot) {
  auto broadcast = [](int root) {
    TensorSignature s = sig(10);
    s.collective = Collective::kBroadcast;
    s.root_rank = root;
    return s;
  };
  auto b = plan_buckets({broadcast(0), sig(10), broadcast(1), broadcast(0), broadcast(1)}, 1000);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0, 3}, {1}, {2, 4}}));
}

TEST(PlanBuckets, ZeroSizedTensorsAreCarried) {
  auto b = plan_buckets({sig(0), sig(0)}, 16);
  EXPECT_EQ(members(b), (std::vector<std::vector<size_t>>{{0, 1}}));
  EXPECT_EQ(b[0].bytes, 0u);
}

TEST(PlanBuckets, EveryInputLandsInExactlyOneBucket) {
  std::vector<TensorSignature> in;
  for (int i = 0; i < 200; ++i)
    in.push_back(sig((i * 37) % 101, i % 3 ? DType::kFloat32 : DType::kFloat16));
  auto b = plan_buckets(in, 512);
  std::vector<int> seen(in.size(), 0);
  for (const auto& bucket : b) {
    size_t bytes = 0;
    for (size_t m : bucket.members) {
      ++seen[m];
      bytes += in[m].bytes();
      EXPECT_TRUE(fusable(in[bucket.members[0]], in[m]));
    }
    EXPECT_EQ(bytes, bucket.bytes);
    EXPECT_TRUE(bucket.members.size() == 1 || bytes <= 512);
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

}  // namespace
}  // namespace arcreduce
