// PowerSGD over the loopback world (sizes 1-8): outputs and error buffers against a naive
// double-precision reference on every step (warm start, zero-column redraws and the dense path
// included), outputs bit-identical on all ranks, error-feedback conservation
// sum_r M_r = sum_r e_r + P * output, contribution = M - e, rank >= min(n, m) reproducing the
// dense mean, PyTorch's skip rule, two All-Reduces per bucket, stats, save/load resuming bit for
// bit, and the Gram-Schmidt helper.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>

#include "compressors/matrix_view.h"
#include "compressors/powersgd.h"
#include "compressors/powersgd_math.h"
#include "tests/compressors/collective_counter.h"
#include "tests/compressors/compressor_harness.h"
#include "tests/compressors/powersgd_reference.h"

namespace arcreduce {
namespace testing {
namespace {

constexpr const char* kErrorName = "powersgd.error";

Config powersgd_config(int64_t rank) {
  Config c;
  c.min_compress_elements = 0;
  c.powersgd_rank = rank;
  return c;
}

// One step of one rank.
struct Step {
  std::vector<std::vector<float>> gradient, m, output, contribution, error;
};

using Gradient = std::function<float(int rank, size_t tensor, int64_t i, int step)>;

struct RunOptions {
  double min_compression_rate = PowerSgd::kMinCompressionRate;
  std::vector<StateStore>* stores = nullptr;
  int first_step = 0;
  std::vector<CompressorStats>* stats = nullptr;
  std::vector<int>* allreduces = nullptr;  // per rank, over all steps
  std::vector<int>* other_collectives = nullptr;
};

// Runs `steps` calls (gradients of steps first_step...) of PowerSGD on `world` ranks; returns
// steps[rank][step].
std::vector<std::vector<Step>> run(int world, const Config& config,
                                   const std::vector<TensorSpec>& tensors, const Gradient& input,
                                   int steps, const RunOptions& options = {}) {
  std::vector<std::vector<Step>> calls(world, std::vector<Step>(steps));
  std::vector<StateStore> local(world);
  std::vector<StateStore>& state = options.stores ? *options.stores : local;
  std::vector<CompressorStats> stats(world);
  std::vector<int> allreduces(world), others(world);
  const CompressionSpec spec{"powersgd", 1.0, "none", "element"};
  const CompressorOptions compress_options = compressor_options(config);
  run_ranks(world, [&](Communicator& raw) {
    const int rank = raw.rank();
    CollectiveCounter comm(raw);
    PowerSgd compressor(options.min_compression_rate);
    Logger log = make_logger(rank, "error");
    for (int step = 0; step < steps; ++step) {
      Step& c = calls[rank][step];
      const size_t count = tensors.size();
      std::vector<CompressTensor> bucket(count);
      for (auto* v : {&c.gradient, &c.m, &c.output, &c.contribution, &c.error}) v->resize(count);
      for (size_t t = 0; t < count; ++t) {
        const size_t n = tensors[t].elements();
        for (size_t i = 0; i < n; ++i) {
          c.gradient[t].push_back(
              input(rank, t, static_cast<int64_t>(i), options.first_step + step));
        }
        TensorState& s = state[rank].get(tensors[t].name, n);
        const std::vector<float>& e = s.floats[kErrorName];
        c.m[t] = c.gradient[t];
        if (e.size() == n) {
          for (size_t i = 0; i < n; ++i) c.m[t][i] = c.gradient[t][i] + e[i];
        }
        c.output[t].assign(n, std::nanf(""));
        c.contribution[t].assign(n, std::nanf(""));
        CompressTensor& b = bucket[t];
        b.name = tensors[t].name;
        b.shape = tensors[t].shape;
        b.elements = n;
        b.step = s.compressed_steps;
        b.input = c.gradient[t].data();
        b.output = c.output[t].data();
        b.contribution = c.contribution[t].data();
      }
      CompressContext ctx{comm, compress_options, spec, stats[rank], log, &state[rank]};
      compressor.reduce(bucket, ctx);
      for (size_t t = 0; t < count; ++t) {
        TensorState& s = state[rank].get(tensors[t].name, tensors[t].elements());
        const std::vector<float>& e = s.floats[kErrorName];
        c.error[t] = e.empty() ? std::vector<float>(tensors[t].elements(), 0.0f) : e;
        ++s.compressed_steps;
      }
    }
    allreduces[rank] = comm.allreduces;
    others[rank] = comm.others;
  });
  if (options.stats) *options.stats = stats;
  if (options.allreduces) *options.allreduces = allreduces;
  if (options.other_collectives) *options.other_collectives = others;
  return calls;
}

// Outputs bit-identical on all ranks; contribution = M - e bit for bit (e = fl(M - contribution));
// and conservation sum_r M_r = sum_r e_r + P * output.
void check_invariants(const std::vector<std::vector<Step>>& calls, const std::string& what) {
  const int world = static_cast<int>(calls.size());
  for (size_t step = 0; step < calls[0].size(); ++step) {
    for (size_t t = 0; t < calls[0][step].output.size(); ++t) {
      const std::vector<float>& out = calls[0][step].output[t];
      for (size_t i = 0; i < out.size(); ++i) {
        double m = 0, e = 0, scale = 0;
        for (int r = 0; r < world; ++r) {
          const Step& c = calls[r][step];
          ASSERT_EQ(c.output[t][i], out[i])
              << what << " rank " << r << " step " << step << " tensor " << t << " i " << i;
          ASSERT_EQ(c.error[t][i], c.m[t][i] - c.contribution[t][i])
              << what << " rank " << r << " step " << step << " tensor " << t << " i " << i;
          m += c.m[t][i];
          e += c.error[t][i];
          scale += std::fabs(c.m[t][i]);
        }
        ASSERT_NEAR(m, e + world * static_cast<double>(out[i]), 1e-5 * std::max(1.0, scale))
            << what << " step " << step << " tensor " << t << " i " << i;
      }
    }
  }
}

float smooth(int rank, size_t t, int64_t i, int step) {
  return smooth_input(rank, t, static_cast<size_t>(i), step);
}
float zero(int, size_t, int64_t, int) {
  return 0.0f;
}
// Zero for the first two steps (Q's columns collapse to zero and must be redrawn), then smooth.
float late(int rank, size_t t, int64_t i, int step) {
  return step < 2 ? 0.0f : smooth(rank, t, i, step);
}
float rank0_silent(int rank, size_t t, int64_t i, int step) {
  return rank == 0 ? 0.0f : smooth(rank, t, i, step);
}

// 24 x 10 and 7 x 30 compress at q = 1, 2 (7 x 30 goes dense at q = 3: 37 * 3 * 2 >= 210); the
// convolution's 4 x 18 view only at q = 1; the rest never has a usable low-rank form.
const std::vector<TensorSpec> kTensors = {
    {"a", {24, 10}}, {"b", {7, 30}}, {"conv", {4, 2, 3, 3}}, {"bias", {10}},
    {"one", {1}},    {"empty", {0}}, {"no-rows", {0, 5}},    {"square", {1, 1}}};

bool compresses(const TensorSpec& t, int64_t rank, double rate, int64_t* rows, int64_t* cols,
                int* q) {
  const MatrixView view = matrix_view(t.shape);
  *rows = view.usable ? view.rows : 1;
  *cols = view.usable ? view.cols : static_cast<int64_t>(t.elements());
  *q = static_cast<int>(std::min({rank, view.rows, view.cols}));
  return view.usable && (view.rows + view.cols) * *q * rate < view.rows * view.cols;
}

// Largest |got - want| / (1 + max |want|) seen by the reference comparisons.
double g_worst = 0;

void compare_with_reference(int world, int64_t rank, const Gradient& input, const std::string& what,
                            double rate = PowerSgd::kMinCompressionRate, int steps = 5) {
  const Config config = powersgd_config(rank);
  RunOptions options;
  options.min_compression_rate = rate;
  const auto calls = run(world, config, kTensors, input, steps, options);
  check_invariants(calls, what);
  for (size_t t = 0; t < kTensors.size(); ++t) {
    int64_t n = 0, m = 0;
    int q = 0;
    const bool low_rank = compresses(kTensors[t], rank, rate, &n, &m, &q);
    ReferencePowerSgd ref(world, kTensors[t].name, n, m, q, low_rank);
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<float>> g(world);
      for (int r = 0; r < world; ++r) g[r] = calls[r][step].gradient[t];
      const std::vector<double> want = ref.step(g, static_cast<uint64_t>(step));
      double scale = 1;
      for (double v : want) scale = std::max(scale, 1 + std::fabs(v));
      for (size_t i = 0; i < want.size(); ++i) {
        const double diff = std::fabs(calls[0][step].output[t][i] - want[i]);
        g_worst = std::max(g_worst, diff / scale);
        ASSERT_LE(diff, 2e-5 * scale)
            << what << " P=" << world << " q=" << rank << " tensor " << kTensors[t].name << " step "
            << step << " i " << i << ": " << calls[0][step].output[t][i] << " vs " << want[i];
        for (int r = 0; r < world; ++r) {
          const double e = std::fabs(calls[r][step].error[t][i] - ref.error[r][i]);
          ASSERT_LE(e, 2e-5 * scale) << what << " P=" << world << " q=" << rank << " tensor "
                                     << kTensors[t].name << " step " << step << " rank " << r;
        }
      }
    }
  }
}

TEST(PowerSgd, MatchesTheNaiveReferenceOnEveryStep) {
  const std::vector<std::pair<std::string, Gradient>> inputs = {
      {"smooth", smooth}, {"zero", zero}, {"late", late}, {"rank0", rank0_silent}};
  for (int world : {1, 2, 3, 4, 5, 8}) {
    for (int64_t rank : {1, 2, 3}) {
      for (const auto& [name, input] : inputs) compare_with_reference(world, rank, input, name);
    }
  }
  // Every matrix on the low-rank path (1 x 1 included), nothing skipped.
  for (int world : {1, 3, 4}) compare_with_reference(world, 2, smooth, "rate 0", 0.0);
  std::printf("powersgd: worst |output - reference| / (1 + max |reference|) = %.2e\n", g_worst);
}

TEST(PowerSgd, ZeroGradientsRedrawQAndRecover) {
  const auto calls = run(3, powersgd_config(2), {{"w", {24, 10}}}, late, 4);
  for (int step = 0; step < 2; ++step) {
    for (float v : calls[0][step].output[0]) ASSERT_EQ(v, 0.0f);
  }
  // Without the redraw Q would stay zero and every later output too.
  double sum = 0;
  for (float v : calls[0][3].output[0]) sum += std::fabs(v);
  EXPECT_GT(sum, 1.0);
}

TEST(PowerSgd, RankAtLeastTheSmallerSideReproducesTheDenseMean) {
  // Rate 0 keeps these matrices on the low-rank path, where P spans the whole column space.
  const std::vector<TensorSpec> tensors = {{"wide", {3, 8}},
                                           {"tall", {6, 4}},
                                           {"square", {5, 5}},
                                           {"row", {1, 7}},
                                           {"conv", {2, 2, 3, 3}}};
  for (int world : {1, 2, 3, 5, 8}) {
    for (int64_t rank : {5, 9}) {
      RunOptions options;
      options.min_compression_rate = 0.0;
      std::vector<CompressorStats> stats;
      options.stats = &stats;
      const auto calls = run(world, powersgd_config(rank), tensors, smooth, 3, options);
      check_invariants(calls, "full rank");
      EXPECT_EQ(stats[0].dense_fallbacks, 0u);
      for (int step = 0; step < 3; ++step) {
        for (size_t t = 0; t < tensors.size(); ++t) {
          for (size_t i = 0; i < tensors[t].elements(); ++i) {
            double mean = 0;
            for (int r = 0; r < world; ++r) mean += calls[r][step].gradient[t][i];
            mean /= world;
            ASSERT_NEAR(calls[0][step].output[t][i], mean, 2e-5 * 11)
                << "P=" << world << " q=" << rank << " " << tensors[t].name << " step " << step;
          }
        }
      }
    }
  }
}

TEST(PowerSgd, SkipsTensorsWhereTheLowRankFormSavesTooLittle) {
  // PyTorch's rule at rate 2: (n + m) q * 2 < n m. 24 x 10 at q = 3: 204 < 240 compresses; at
  // q = 4: 272 >= 240 goes dense (the exact mean, no error kept), like 1-D tensors.
  for (int64_t rank : {3, 4}) {
    std::vector<CompressorStats> stats;
    RunOptions options;
    options.stats = &stats;
    const auto calls =
        run(3, powersgd_config(rank), {{"w", {24, 10}}, {"b", {10}}}, smooth, 2, options);
    EXPECT_EQ(stats[0].dense_fallbacks, rank == 3 ? 2u : 4u) << rank;
    const bool exact = rank == 4;
    double worst = 0;
    for (size_t i = 0; i < 240; ++i) {
      float sum = 0;
      for (int r = 0; r < 3; ++r) sum += calls[r][1].gradient[0][i];
      worst = std::max(worst, std::fabs(static_cast<double>(calls[0][1].output[0][i] - sum / 3)));
      if (exact) {
        EXPECT_EQ(calls[0][1].error[0][i], 0.0f);
      }
    }
    if (exact) {
      EXPECT_LT(worst, 1e-5);
    } else {
      EXPECT_GT(worst, 0.1);  // rank 3 of a random 24 x 10 matrix is far from it
    }
  }
  EXPECT_TRUE(powersgd::worth_compressing(1536, 384, 1, 2.0));
  EXPECT_FALSE(powersgd::worth_compressing(4, 4, 1, 2.0));  // 16 is not < 16
  EXPECT_TRUE(powersgd::worth_compressing(4, 5, 1, 2.0));   // 18 < 20
  EXPECT_FALSE(powersgd::worth_compressing(4, 5, 0, 0.0));
  EXPECT_EQ(powersgd::effective_rank(4, 3, 100), 3);
  EXPECT_EQ(powersgd::effective_rank(1, 300, 100), 1);
}

TEST(PowerSgd, TwoAllReducesPerBucketAndItsBytesInStats) {
  // Two low-rank tensors and three dense ones: one All-Reduce for every P and the dense
  // tensors, one for every Q, nothing else.
  const std::vector<TensorSpec> tensors = {
      {"a", {24, 10}}, {"bias", {10}}, {"b", {7, 30}}, {"one", {1}}, {"empty", {0}}};
  std::vector<CompressorStats> stats;
  std::vector<int> allreduces, others;
  RunOptions options;
  options.stats = &stats;
  options.allreduces = &allreduces;
  options.other_collectives = &others;
  run(4, powersgd_config(2), tensors, smooth, 3, options);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(allreduces[r], 2 * 3) << r;
    EXPECT_EQ(others[r], 0) << r;
  }
  // Per step: (24 + 10) * 2 + (7 + 30) * 2 values of P and Q, plus 10 + 1 dense values.
  EXPECT_EQ(stats[0].value_bytes, 3u * ((34 + 37) * 2 + 11) * 4);
  EXPECT_EQ(stats[0].dense_fallbacks, 3u * 3);
  EXPECT_EQ(stats[0].index_bytes, 0u);
  // Only dense tensors: a single All-Reduce; nothing at all: none.
  run(2, powersgd_config(1), {{"bias", {10}}}, smooth, 1, options);
  EXPECT_EQ(allreduces[0], 1);
  run(2, powersgd_config(1), {{"empty", {0}}}, smooth, 1, options);
  EXPECT_EQ(allreduces[0], 0);
}

TEST(PowerSgd, MinimumCompressedSizeGoesDense) {
  Config config = powersgd_config(1);
  config.min_compress_elements = 241;
  std::vector<CompressorStats> stats;
  RunOptions options;
  options.stats = &stats;
  const auto calls = run(2, config, {{"w", {24, 10}}}, smooth, 2, options);
  EXPECT_EQ(stats[0].dense_fallbacks, 2u);
  for (size_t i = 0; i < 240; ++i) {
    EXPECT_EQ(calls[0][1].output[0][i],
              (calls[0][1].gradient[0][i] + calls[1][1].gradient[0][i]) * 0.5f);
  }
}

TEST(PowerSgd, SaveAndLoadResumesBitForBit) {
  const std::vector<TensorSpec> tensors = {{"a", {24, 10}}, {"b", {7, 30}}, {"bias", {10}}};
  const Config config = powersgd_config(2);
  const auto whole = run(3, config, tensors, smooth, 7);
  std::vector<StateStore> stores(3);
  RunOptions first;
  first.stores = &stores;
  run(3, config, tensors, smooth, 4, first);
  std::vector<StateStore> resumed(3);
  for (int r = 0; r < 3; ++r) {
    const std::string path = ::testing::TempDir() + "powersgd_state." + std::to_string(r);
    stores[r].save(path, r, 3);
    resumed[r].load(path, r, 3);
    std::remove(path.c_str());
  }
  RunOptions rest_options;
  rest_options.stores = &resumed;
  rest_options.first_step = 4;
  const auto rest = run(3, config, tensors, smooth, 3, rest_options);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(resumed[r].get("a", 240).floats["powersgd.q"].empty());
    for (int s = 0; s < 3; ++s) {
      EXPECT_EQ(rest[r][s].output, whole[r][4 + s].output) << "rank " << r << " step " << s;
      EXPECT_EQ(rest[r][s].error, whole[r][4 + s].error) << "rank " << r << " step " << s;
    }
  }
  // Without the state the continuation differs (the warm start and the error matter).
  std::vector<StateStore> fresh(3);
  RunOptions cold;
  cold.stores = &fresh;
  cold.first_step = 4;
  const auto restarted = run(3, config, tensors, smooth, 1, cold);
  EXPECT_NE(restarted[0][0].output[0], whole[0][4].output[0]);
}

TEST(PowerSgd, RejectsABadRankAndAMissingStateStore) {
  run_ranks(1, [&](Communicator& comm) {
    PowerSgd compressor;
    CompressionSpec spec{"powersgd", 1.0, "none", "element"};
    CompressorStats stats;
    Logger log = make_logger(0, "error");
    StateStore store;
    Config config = powersgd_config(0);
    std::vector<CompressTensor> bucket;
    const CompressorOptions rank_zero = compressor_options(config);
    CompressContext bad_rank{comm, rank_zero, spec, stats, log, &store};
    try {
      compressor.reduce(bucket, bad_rank);
      ADD_FAILURE() << "rank 0 accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("ARCREDUCE_POWERSGD_RANK"), std::string::npos);
    }
    config.powersgd_rank = 1;
    const CompressorOptions rank_one = compressor_options(config);
    CompressContext no_store{comm, rank_one, spec, stats, log};
    EXPECT_THROW(compressor.reduce(bucket, no_store), Error);
  });
}

TEST(PowerSgdMath, GramSchmidtGivesOrthonormalColumnsInOrder) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal;
  const int64_t length = 50;
  const int count = 4;
  std::vector<float> a(length * count);
  for (float& v : a) v = normal(gen);
  const std::vector<float> original = a;
  powersgd::orthogonalize_columns(a.data(), length, count, false);
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < count; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < length; ++k) dot += a[i * length + k] * a[j * length + k];
      EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-6) << i << " " << j;
    }
  }
  // The first column keeps its direction (Gram-Schmidt, not any orthonormal basis).
  double norm = 0;
  for (int64_t k = 0; k < length; ++k) norm += original[k] * original[k];
  for (int64_t k = 0; k < length; ++k) EXPECT_NEAR(a[k], original[k] / std::sqrt(norm), 1e-6);
  // Row-major storage (P's layout) gives the same bits.
  std::vector<float> rows(length * count);
  for (int c = 0; c < count; ++c) {
    for (int64_t k = 0; k < length; ++k) rows[k * count + c] = original[c * length + k];
  }
  powersgd::orthogonalize_columns(rows.data(), length, count, true);
  for (int c = 0; c < count; ++c) {
    for (int64_t k = 0; k < length; ++k) ASSERT_EQ(rows[k * count + c], a[c * length + k]);
  }
}

TEST(PowerSgdMath, ZeroAndDependentColumnsBecomeZero) {
  // Columns: x, 0, 2x, y.
  const int64_t length = 6;
  std::vector<float> x = {1, 2, 0, -1, 3, 1}, y = {0, 1, 1, 0, -2, 5};
  std::vector<float> a;
  for (const auto& col : {x, std::vector<float>(length, 0.0f), std::vector<float>{}, y}) {
    if (col.empty()) {
      for (float v : x) a.push_back(2 * v);
    } else {
      a.insert(a.end(), col.begin(), col.end());
    }
  }
  powersgd::orthogonalize_columns(a.data(), length, 4, false);
  for (int64_t k = 0; k < length; ++k) {
    EXPECT_EQ(a[length + k], 0.0f);
    EXPECT_EQ(a[2 * length + k], 0.0f);
  }
  double dot = 0, norm = 0;
  for (int64_t k = 0; k < length; ++k) {
    dot += a[k] * a[3 * length + k];
    norm += a[3 * length + k] * a[3 * length + k];
  }
  EXPECT_NEAR(dot, 0.0, 1e-6);
  EXPECT_NEAR(norm, 1.0, 1e-6);
  // Deterministic: the same input gives the same bits.
  std::vector<float> again = a, twice = a;
  powersgd::orthogonalize_columns(again.data(), length, 4, false);
  powersgd::orthogonalize_columns(twice.data(), length, 4, false);
  EXPECT_EQ(again, twice);
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
