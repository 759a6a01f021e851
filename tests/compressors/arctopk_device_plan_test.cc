// The ARC-Top-K device plan run with the CPU kernels against the ArcTopK compressor (error
// feedback none) on the loopback world: outputs and contributions must be bit-identical, for
// the sketch, exact and dense paths, several ratios and world sizes, sizes 0 and 1, and ties.
#include <gtest/gtest.h>

#include <cstring>

#include "compressors/arctopk_device_plan.h"
#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

Config plan_config(int r) {
  Config c;
  c.sketch_rank = r;
  c.min_compress_elements = 0;
  c.seed = 11;
  return c;
}

float tied_input(int rank, size_t, size_t i, int) {
  // Every row of 16 values is the same: all scores tie, the lowest rows must win.
  return static_cast<float>(rank + 1) * 0.5f + 0.0f * static_cast<float>(i);
}

std::vector<RankResult> run_plan(int world, const CompressionSpec& spec, const Config& config,
                                 const std::vector<TensorSpec>& tensors, const InputFn& input,
                                 int step) {
  std::vector<RankResult> results(world);
  run_ranks(world, [&](Communicator& comm) {
    const int rank = comm.rank();
    RankResult& res = results[rank];
    std::vector<std::vector<float>> in(tensors.size());
    res.output.assign(tensors.size(), {});
    res.contribution.assign(tensors.size(), {});
    std::vector<ArcTopKPlanTensor> pts(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const size_t n = tensors[t].elements();
      in[t].resize(n);
      for (size_t i = 0; i < n; ++i) in[t][i] = input(rank, t, i, step);
      res.output[t].assign(n, std::nanf(""));
      res.contribution[t].assign(n, std::nanf(""));
      pts[t].name = tensors[t].name;
      pts[t].shape = tensors[t].shape;
      pts[t].elements = n;
      pts[t].step = static_cast<uint64_t>(step);
      pts[t].input = in[t].data();
      pts[t].output = res.output[t].data();
      pts[t].contribution = res.contribution[t].data();
    }
    const ArcTopKPlan plan = plan_arctopk(pts, compressor_options(config), spec, comm.size());
    std::vector<float> first(plan.first_floats), second(plan.second_floats),
        scratch(plan.scratch_floats);
    std::vector<int64_t> rows(plan.row_count);
    ArcTopKPlanBuffers buf{first.data(), second.data(), rows.data(), scratch.data()};
    CpuArcKernels k;
    run_arctopk_plan(k, plan, pts, buf, [&](float* data, size_t n) {
      comm.allreduce(data, n, ScalarType::kFloat32, CollectiveOp::kSum);
    });
  });
  return results;
}

void expect_bit_identical(const std::vector<RankResult>& a, const std::vector<RankResult>& b,
                          const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t rank = 0; rank < a.size(); ++rank) {
    for (size_t t = 0; t < a[rank].output.size(); ++t) {
      const auto& ao = a[rank].output[t];
      const auto& bo = b[rank].output[t];
      ASSERT_EQ(ao.size(), bo.size());
      EXPECT_TRUE(same_bits(ao, bo)) << what << ": output of tensor " << t << " on rank " << rank;
      const auto& ac = a[rank].contribution[t];
      const auto& bc = b[rank].contribution[t];
      EXPECT_TRUE(same_bits(ac, bc))
          << what << ": contribution of tensor " << t << " on rank " << rank;
    }
  }
}

const std::vector<TensorSpec>& mixed_bucket() {
  static const std::vector<TensorSpec> tensors = {
      {"fc.weight", {64, 32}},        // sketch path
      {"conv.weight", {8, 4, 3, 3}},  // N-D view
      {"small", {8, 4}},              // exact path (r not smaller than m)
      {"bias", {5}},                  // 1-D: dense mean
      {"empty", {0, 7}},              // 0 elements
      {"one", {1, 1}},                // 1 element
      {"row", {1, 64}},               // one row
      {"tall", {300, 9}},             // sketch path, k rounds
  };
  return tensors;
}

class ArcTopKPlanWorlds : public ::testing::TestWithParam<int> {};

TEST_P(ArcTopKPlanWorlds, MatchesArcTopKBitForBit) {
  const int world = GetParam();
  for (double ratio : {0.01, 0.1, 0.5, 1.0}) {
    for (int r : {1, 4}) {
      const Config config = plan_config(r);
      const CompressionSpec spec{"arctopk", ratio, "none", ""};
      const int steps = 2;
      auto ref =
          run_compressor(world, "arctopk", spec, config, mixed_bucket(), smooth_input, steps);
      auto got = run_plan(world, spec, config, mixed_bucket(), smooth_input, steps - 1);
      expect_bit_identical(ref, got, "ratio " + std::to_string(ratio) + " r " + std::to_string(r));
    }
  }
}

// ARCREDUCE_RANDOM_ROWS draws its rows with the backend's kernels, ARCREDUCE_ROW_LENGTH changes
// the view: the plan follows the host compressor in both.
TEST_P(ArcTopKPlanWorlds, RandomRowsAndSplitRowsMatchArcTopK) {
  const int world = GetParam();
  for (double random_rows : {0.0, 0.5, 1.0}) {
    for (int64_t row_length : {0, 3}) {
      Config config = plan_config(2);
      config.random_rows = random_rows;
      config.row_length = row_length;
      const CompressionSpec spec{"arctopk", 0.3, "none", ""};
      auto ref = run_compressor(world, "arctopk", spec, config, mixed_bucket(), smooth_input, 2);
      auto got = run_plan(world, spec, config, mixed_bucket(), smooth_input, 1);
      expect_bit_identical(ref, got,
                           "random rows " + std::to_string(random_rows) + " row length " +
                               std::to_string(row_length));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Np, ArcTopKPlanWorlds, ::testing::Values(1, 2, 3, 5));

TEST(ArcTopKPlan, TiesGoToTheLowerRowOnEveryRank) {
  const std::vector<TensorSpec> tensors = {{"tied", {40, 16}}, {"tied_exact", {6, 3}}};
  Config config = plan_config(4);
  config.random_rows = 0;  // all k rows by score (the default draws half of them at random)
  const CompressionSpec spec{"arctopk", 0.1, "none", ""};
  auto ref = run_compressor(3, "arctopk", spec, config, tensors, tied_input, 1);
  auto got = run_plan(3, spec, config, tensors, tied_input, 0);
  expect_bit_identical(ref, got, "ties");
  // The selected rows are the first k = 4 rows.
  EXPECT_EQ(nonzero_rows(got[0].output[0], 16), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(ArcTopKPlan, PathsFollowTheCompressorsRules) {
  const Config config = plan_config(4);
  const CompressionSpec spec{"arctopk", 0.1, "none", ""};
  std::vector<ArcTopKPlanTensor> pts;
  for (const TensorSpec& t : mixed_bucket()) {
    ArcTopKPlanTensor p;
    p.name = t.name;
    p.shape = t.shape;
    p.elements = t.elements();
    pts.push_back(p);
  }
  const ArcTopKPlan plan = plan_arctopk(pts, compressor_options(config), spec, 2);
  // fc.weight 64x32: k = 6; conv 8x4x3x3 viewed as 16x18: k = 1; tall 300x9: k = 30;
  // small 8x4 exact: k = 1; row 1x64 (sketch 4 + 64 not < 64): exact, k = 1; one 1x1: exact.
  EXPECT_EQ(plan.items[0].path, ArcTopKPlan::Path::kSketch);
  EXPECT_EQ(plan.items[2].path, ArcTopKPlan::Path::kExact);
  EXPECT_EQ(plan.items[3].path, ArcTopKPlan::Path::kDense);
  EXPECT_EQ(plan.items[4].path, ArcTopKPlan::Path::kDense);
  EXPECT_EQ(plan.items[6].path, ArcTopKPlan::Path::kExact);
  EXPECT_EQ(plan.items[7].path, ArcTopKPlan::Path::kSketch);
  EXPECT_EQ(plan.items[7].k, 30);
  EXPECT_EQ(plan.selected_rows, 6u + 1u + 1u + 1u + 1u + 30u);

  // Every row at random: the sketch and exact paths become the random path, which adds nothing
  // to the first All-Reduce; only the dense tensors (bias 5, empty 0) remain there.
  Config random = config;
  random.random_rows = 1.0;
  const ArcTopKPlan drawn = plan_arctopk(pts, compressor_options(random), spec, 2);
  for (size_t i : {0, 1, 2, 5, 6, 7}) {
    EXPECT_EQ(drawn.items[i].path, ArcTopKPlan::Path::kRandom) << mixed_bucket()[i].name;
  }
  EXPECT_EQ(drawn.first_floats, 5u);
  EXPECT_EQ(drawn.sketch_bytes, 0u);
  EXPECT_EQ(drawn.second_floats, 6u * 32 + 1u * 18 + 1u * 4 + 1u * 1 + 1u * 64 + 30u * 9);
  EXPECT_EQ(drawn.selected_rows, plan.selected_rows);
}

TEST(ArcTopKPlan, ShapeMismatchNamesTheTensor) {
  ArcTopKPlanTensor t;
  t.name = "layer3.weight";
  t.shape = {4, 4};
  t.elements = 15;
  try {
    plan_arctopk({t}, compressor_options(plan_config(4)),
                 CompressionSpec{"arctopk", 0.1, "none", ""}, 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer3.weight"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
