// ARC-Top-K against a naive reference: sketch in double with the same shared projection, rows
// selected from the summed sketch, output = exact mean on those rows and zero elsewhere.
#include <gtest/gtest.h>

#include "compressors/kernels/kernels.h"
#include "compressors/matrix_view.h"
#include "tests/compressors/collective_counter.h"
#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

Config arc_config(int r) {
  Config c;
  c.sketch_rank = r;
  c.min_compress_elements = 0;
  c.seed = 7;
  c.check_consistency = true;
  c.random_rows = 0;  // every row by score, as the references here; random rows have own tests
  return c;
}

CompressionSpec spec(double ratio, const std::string& ef = "none") {
  return CompressionSpec{"arctopk", ratio, ef, ""};
}

// Rows the ARC reference selects for tensor `t` of `world` ranks.
std::vector<int64_t> reference_rows(int world, const TensorSpec& t, const Config& c, double ratio,
                                    const InputFn& input, size_t index, uint64_t step, bool exact) {
  const MatrixView v = matrix_view(t.shape);
  const int64_t n = v.rows, m = v.cols, r = c.sketch_rank;
  std::vector<double> summed(exact ? n * m : n * r, 0.0);
  std::vector<float> proj(m * r);
  kernels::fill_gaussian(kernels::philox_key(c.seed, t.name, step), proj.data(), proj.size());
  for (int rank = 0; rank < world; ++rank) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        const double y = input(rank, index, i * m + j, 0);
        if (exact) {
          summed[i * m + j] += y;
        } else {
          for (int64_t q = 0; q < r; ++q) summed[i * r + q] += y * proj[j * r + q];
        }
      }
    }
  }
  const int64_t width = exact ? m : r;
  std::vector<double> score(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t q = 0; q < width; ++q) score[i] += summed[i * width + q] * summed[i * width + q];
  }
  return naive_top_k(score, kept(ratio, n));
}

void expect_arc_output(int world, const std::vector<TensorSpec>& tensors, int r, double ratio,
                       const std::vector<bool>& exact) {
  const Config c = arc_config(r);
  auto results = run_compressor(world, "arctopk", spec(ratio), c, tensors, smooth_input);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const MatrixView v = matrix_view(tensors[t].shape);
    auto rows = reference_rows(world, tensors[t], c, ratio, smooth_input, t, 0, exact[t]);
    std::vector<bool> selected(v.rows, false);
    for (int64_t row : rows) selected[row] = true;
    for (int rank = 0; rank < world; ++rank) {
      const auto& out = results[rank].output[t];
      const auto& own = results[rank].contribution[t];
      ASSERT_EQ(out, results[0].output[t]) << "rank " << rank << " differs";
      for (int64_t i = 0; i < v.rows; ++i) {
        for (int64_t j = 0; j < v.cols; ++j) {
          const size_t e = i * v.cols + j;
          double mean = 0;
          for (int q = 0; q < world; ++q) mean += smooth_input(q, t, e, 0);
          mean /= world;
          const double want = selected[i] ? mean : 0.0;
          const double mine = selected[i] ? smooth_input(rank, t, e, 0) : 0.0;
          ASSERT_NEAR(out[e], want, 1e-5 * (1 + std::fabs(want)))
              << tensors[t].name << " np" << world << " row " << i;
          ASSERT_EQ(own[e], static_cast<float>(mine)) << "contribution row " << i;
        }
      }
    }
  }
}

class ArcTopKWorlds : public ::testing::TestWithParam<int> {};

TEST_P(ArcTopKWorlds, SketchPathMatchesReference) {
  // 64 x 32, r = 4, k = 8: 64*4 + 8*32 < 64*32, so the sketch path runs; plus a 4-D conv-like
  // tensor [8, 4, 3, 3] (2*3*3 = 18 divides 288: viewed 16 x 18).
  expect_arc_output(GetParam(), {{"w", {64, 32}}, {"conv", {8, 4, 3, 3}}}, 4, 0.125,
                    {false, false});
}

TEST_P(ArcTopKWorlds, ExactPathWhenSketchIsNotSmaller) {
  // r >= m (40 x 4 with r = 4) and n*r + k*m >= n*m (10 x 6, r = 4, k = 5).
  expect_arc_output(GetParam(), {{"narrow", {40, 4}}, {"small", {10, 6}}}, 4, 0.5, {true, true});
}

// ARCREDUCE_RANDOM_ROWS=1: every row is drawn, so no sketch is computed or sent; the tensors that
// would have taken the sketch or the exact path send only their drawn rows, in one All-Reduce.
struct RandomRowsRun {
  std::vector<RankResult> results;
  std::vector<CompressorStats> stats;
  std::vector<int> allreduces;
};

RandomRowsRun run_every_row_random(int world, const std::vector<TensorSpec>& tensors, double ratio,
                                   uint64_t step) {
  Config c = arc_config(2);
  c.random_rows = 1.0;
  c.check_consistency = false;  // its hash exchange would be counted too
  RandomRowsRun run{std::vector<RankResult>(world), std::vector<CompressorStats>(world),
                    std::vector<int>(world)};
  run_ranks(world, [&](Communicator& raw) {
    const int rank = raw.rank();
    CollectiveCounter comm(raw);
    auto arc = make_compressor("arctopk");
    Logger log = make_logger(rank, "error");
    RankResult& res = run.results[rank];
    std::vector<std::vector<float>> in(tensors.size());
    std::vector<CompressTensor> bucket(tensors.size());
    res.output.resize(tensors.size());
    res.contribution.resize(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      const size_t n = tensors[t].elements();
      for (size_t i = 0; i < n; ++i) in[t].push_back(smooth_input(rank, t, i, 0));
      res.output[t].assign(n, std::nanf(""));
      res.contribution[t].assign(n, std::nanf(""));
      CompressTensor& ct = bucket[t];
      ct.name = tensors[t].name;
      ct.shape = tensors[t].shape;
      ct.elements = n;
      ct.step = step;
      ct.input = in[t].data();
      ct.output = res.output[t].data();
      ct.contribution = res.contribution[t].data();
    }
    const CompressionSpec sp = spec(ratio);
    const CompressorOptions options = compressor_options(c);
    CompressContext ctx{comm, options, sp, run.stats[rank], log, nullptr};
    arc->reduce(bucket, ctx);
    run.allreduces[rank] = comm.allreduces + comm.others;
  });
  return run;
}

TEST_P(ArcTopKWorlds, EveryRowAtRandomSendsNoSketch) {
  const int world = GetParam();
  // With ranked rows "w" would take the sketch path and "narrow" the exact one (m = r = 2);
  // "bias" is a dense mean.
  const std::vector<TensorSpec> tensors = {{"w", {64, 32}}, {"narrow", {40, 2}}, {"bias", {5}}};
  const double ratio = 0.25;
  const uint64_t step = 3;
  const RandomRowsRun run = run_every_row_random(world, tensors, ratio, step);
  uint64_t values = 5;  // the bias
  for (size_t t = 0; t < 2; ++t) {
    const MatrixView v = matrix_view(tensors[t].shape);
    const int64_t k = kept(ratio, v.rows);
    std::vector<int64_t> drawn(static_cast<size_t>(k));
    draw_random_rows(7, tensors[t].name, step, v.rows, k, drawn.data());
    std::vector<bool> selected(static_cast<size_t>(v.rows), false);
    for (int64_t row : drawn) selected[static_cast<size_t>(row)] = true;
    values += static_cast<uint64_t>(k * v.cols);
    for (int rank = 0; rank < world; ++rank) {
      for (int64_t i = 0; i < v.rows; ++i) {
        for (int64_t j = 0; j < v.cols; ++j) {
          const auto e = static_cast<size_t>(i * v.cols + j);
          double mean = 0;
          for (int q = 0; q < world; ++q) mean += smooth_input(q, t, e, 0);
          mean /= world;
          const float mine = selected[i] ? smooth_input(rank, t, e, 0) : 0.0f;
          ASSERT_NEAR(run.results[rank].output[t][e], selected[i] ? mean : 0.0,
                      1e-5 * (1 + std::fabs(mean)))
              << tensors[t].name << " rank " << rank << " row " << i;
          ASSERT_EQ(run.results[rank].contribution[t][e], mine)
              << tensors[t].name << " rank " << rank << " row " << i;
        }
      }
    }
  }
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(run.stats[rank].sketch_bytes, 0u) << "rank " << rank;
    EXPECT_EQ(run.stats[rank].value_bytes, values * sizeof(float)) << "rank " << rank;
    // The bias's dense mean and the drawn rows: two All-Reduces, none for a sketch.
    EXPECT_EQ(run.allreduces[rank], 2) << "rank " << rank;
  }
  // Without a dense tensor the bucket is one All-Reduce.
  const RandomRowsRun rows_only = run_every_row_random(world, {tensors[0]}, ratio, step);
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(rows_only.allreduces[rank], 1);
}

// The same under efm, whose x = u + e reaches ARC-Top-K as a lazy stream: the stream must still
// run when no sketch reads it. Three steps against a naive efm with masking (k = 3 of 64 rows is
// below eta's share, so the sent rows' velocity is cleared).
TEST_P(ArcTopKWorlds, EveryRowAtRandomUnderEfmMatchesNaiveEfm) {
  const int world = GetParam();
  Config c = arc_config(2);
  c.random_rows = 1.0;
  c.check_consistency = false;
  const std::vector<TensorSpec> tensors = {{"w", {64, 32}}};
  const int steps = 3;
  const double ratio = 0.05;
  auto got = run_compressor(world, "arctopk", spec(ratio, "efm"), c, tensors, smooth_input, steps);
  const int64_t n = 64, m = 32, k = kept(ratio, n);
  const float beta = 1.0f - static_cast<float>(c.ef_momentum);
  std::vector<std::vector<float>> u(world, std::vector<float>(n * m, 0.0f)), e = u, x = u;
  std::vector<double> mean(n * m);
  std::vector<bool> selected;
  for (int s = 0; s < steps; ++s) {
    std::vector<int64_t> drawn(static_cast<size_t>(k));
    draw_random_rows(c.seed, "w", static_cast<uint64_t>(s), n, k, drawn.data());
    selected.assign(static_cast<size_t>(n), false);
    for (int64_t row : drawn) selected[static_cast<size_t>(row)] = true;
    std::fill(mean.begin(), mean.end(), 0.0);
    for (int q = 0; q < world; ++q) {
      for (int64_t i = 0; i < n * m; ++i) {
        u[q][i] = smooth_input(q, 0, static_cast<size_t>(i), s) + beta * u[q][i];
        e[q][i] += u[q][i];
        x[q][i] = e[q][i];
        if (selected[i / m]) mean[i] += x[q][i] / world;
      }
      for (int64_t i = 0; i < n * m; ++i) {
        if (!selected[i / m]) continue;
        e[q][i] = 0.0f;
        if (x[q][i] != 0.0f) u[q][i] = 0.0f;
      }
    }
  }
  for (int q = 0; q < world; ++q) {
    for (int64_t i = 0; i < n * m; ++i) {
      const double want = selected[i / m] ? mean[i] : 0.0;
      ASSERT_NEAR(got[q].output[0][i], want, 1e-4 * (1 + std::fabs(want)))
          << "rank " << q << " element " << i;
      ASSERT_NEAR(got[q].contribution[0][i], selected[i / m] ? x[q][i] : 0.0f,
                  1e-4 * (1 + std::fabs(x[q][i])))
          << "rank " << q << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Np, ArcTopKWorlds, ::testing::Range(1, 9));

TEST(ArcTopK, RowLengthSplitsLongRows) {
  // 784 = 56 * 14: the largest divisor in [32, 64] is 56.
  MatrixView v = arc_matrix_view({1024, 784}, 64);
  EXPECT_EQ(v.rows, 1024 * 14);
  EXPECT_EQ(v.cols, 56);
  v = arc_matrix_view({1024, 1024}, 64);
  EXPECT_EQ(v.rows, 1024 * 16);
  EXPECT_EQ(v.cols, 64);
  // Rows already short enough, 0 (off), 1-D, and a prime row length with no divisor in range.
  v = arc_matrix_view({100, 40}, 64);
  EXPECT_EQ(v.rows, 100);
  EXPECT_EQ(v.cols, 40);
  v = arc_matrix_view({10, 784}, 0);
  EXPECT_EQ(v.rows, 10);
  EXPECT_EQ(v.cols, 784);
  EXPECT_FALSE(arc_matrix_view({4096}, 64).usable);
  v = arc_matrix_view({3, 1009}, 64);
  EXPECT_EQ(v.rows, 3);
  EXPECT_EQ(v.cols, 1009);
  // Conv kernels: the split applies to the reference's view (2 t^2 columns).
  v = arc_matrix_view({64, 64, 3, 3}, 9);
  EXPECT_EQ(v.cols, 9);
  EXPECT_EQ(v.rows, 64 * 64);
}

// A tensor split into rows of L reduces exactly like the same data shaped [d / L, L]: same rows
// selected (the projection is keyed by the name), same output, bit for bit, on every world size.
TEST(ArcTopK, SplitViewEqualsReshapedTensor) {
  for (int world : {1, 2, 3}) {
    Config split = arc_config(2);
    split.row_length = 8;
    const Config natural = arc_config(2);
    auto a = run_compressor(world, "arctopk", spec(0.1), split, {{"w", {30, 24}}}, smooth_input, 2);
    auto b =
        run_compressor(world, "arctopk", spec(0.1), natural, {{"w", {90, 8}}}, smooth_input, 2);
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(a[r].output[0], b[r].output[0]) << "world " << world << " rank " << r;
      ASSERT_EQ(a[r].contribution[0], b[r].contribution[0]) << "world " << world;
    }
    EXPECT_EQ(nonzero_rows(a[0].output[0], 8).size(), 9u);  // k = 0.1 * 90
  }
}

TEST(ArcTopK, OneDimensionalAndTinyTensorsAreDenseMeans) {
  Config c = arc_config(4);
  c.min_compress_elements = 100;
  std::vector<TensorSpec> tensors = {{"bias", {37}}, {"small", {5, 5}}, {"empty", {0, 3}}};
  auto results = run_compressor(3, "arctopk", spec(0.1), c, tensors, smooth_input);
  for (size_t t = 0; t < 2; ++t) {
    for (size_t e = 0; e < tensors[t].elements(); ++e) {
      double mean = 0;
      for (int q = 0; q < 3; ++q) mean += smooth_input(q, t, e, 0);
      EXPECT_NEAR(results[1].output[t][e], mean / 3, 1e-5);
    }
  }
}

TEST(ArcTopK, SelectionIsScaleInvariant) {
  Config c = arc_config(4);
  std::vector<TensorSpec> tensors = {{"w", {128, 48}}};
  auto base = run_compressor(3, "arctopk", spec(0.05), c, tensors, smooth_input);
  auto scaled = run_compressor(
      3, "arctopk", spec(0.05), c, tensors,
      [](int r, size_t t, size_t i, int s) { return 8.0f * smooth_input(r, t, i, s); });
  EXPECT_EQ(nonzero_rows(base[0].output[0], 48), nonzero_rows(scaled[0].output[0], 48));
  EXPECT_EQ(nonzero_rows(base[0].output[0], 48).size(), 6u);
}

TEST(ArcTopK, FreshProjectionEveryStep) {
  Config c = arc_config(2);
  std::vector<TensorSpec> tensors = {{"w", {256, 16}}};
  // Inputs equal across steps: only the projection changes the selection.
  auto same = [](int r, size_t t, size_t i, int) { return smooth_input(r, t, i, 0); };
  auto one = run_compressor(2, "arctopk", spec(0.05), c, tensors, same, 1);
  auto two = run_compressor(2, "arctopk", spec(0.05), c, tensors, same, 2);
  EXPECT_NE(nonzero_rows(one[0].output[0], 16), nonzero_rows(two[0].output[0], 16));
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
