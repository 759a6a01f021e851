// Top-K, Rand-K and fp16 against naive references; ratio 1 equals the dense mean for every
// compressor and error-feedback variant.
#include <gtest/gtest.h>

#include <set>

#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

Config base_config() {
  Config c;
  c.min_compress_elements = 0;
  c.seed = 3;
  c.check_consistency = true;
  return c;
}

double dense_mean(int world, size_t t, size_t e, int step = 0) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += smooth_input(r, t, e, step);
  return s / world;
}

TEST(TopK, EqualsTheMeanOfEveryRanksOwnTopK) {
  for (int world : {1, 2, 3, 5, 8}) {
    std::vector<TensorSpec> tensors = {{"a", {1000}}, {"b", {7, 13}}, {"one", {1}}};
    auto res = run_compressor(world, "topk", {"topk", 0.05, "none", "element"}, base_config(),
                              tensors, smooth_input);
    for (size_t t = 0; t < tensors.size(); ++t) {
      const size_t n = tensors[t].elements();
      std::vector<double> expect(n, 0.0);
      for (int r = 0; r < world; ++r) {
        std::vector<double> mag(n);
        for (size_t i = 0; i < n; ++i) mag[i] = std::fabs(smooth_input(r, t, i, 0));
        const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(0.05 * n));
        const std::vector<int64_t> top = naive_top_k(mag, k);
        for (int64_t i : top) expect[i] += smooth_input(r, t, i, 0) / world;
        // This rank's contribution is exactly its own selection.
        for (size_t i = 0; i < n; ++i) {
          const bool kept = std::binary_search(top.begin(), top.end(), static_cast<int64_t>(i));
          ASSERT_EQ(res[r].contribution[t][i], kept ? smooth_input(r, t, i, 0) : 0.0f);
        }
      }
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(res[r].output[t], res[0].output[t]);
        for (size_t i = 0; i < n; ++i) ASSERT_NEAR(res[r].output[t][i], expect[i], 1e-5);
      }
    }
  }
}

// Several ranks per host exchanging by host: each host's first rank selects from the host's sum
// (its ranks in rank order), only the hosts' selections are gathered, and each rank's
// contribution is its own input on its host's selection (so a host's contributions add up to
// the compressed host sum). Even and uneven hosts, both granularities.
TEST(TopK, ByHostSelectsFromEachHostsSum) {
  struct Layout {
    int ranks, per_host;
  };
  for (const Layout l : {Layout{4, 2}, Layout{3, 2}, Layout{8, 4}, Layout{6, 3}}) {
    for (const char* granularity : {"element", "row"}) {
      const bool rows = std::string(granularity) == "row";
      std::vector<TensorSpec> tensors = {{"a", {100, 10}}, {"b", {7, 13}}};
      if (!rows) tensors.push_back({"one", {1}});
      auto res = run_compressor(l.ranks, "topk", {"topk", 0.05, "none", granularity}, base_config(),
                                tensors, smooth_input, 1, nullptr, l.per_host);
      for (size_t t = 0; t < tensors.size(); ++t) {
        const size_t n = tensors[t].elements();
        const int64_t cols = rows ? tensors[t].shape.back() : 1;
        const int64_t units = static_cast<int64_t>(n) / cols;
        const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(0.05 * units));
        std::vector<double> expect(n, 0.0);
        for (int first = 0; first < l.ranks; first += l.per_host) {
          const int end = std::min(l.ranks, first + l.per_host);
          std::vector<float> sum(n, 0.0f);
          for (size_t i = 0; i < n; ++i) {
            sum[i] = smooth_input(first, t, i, 0);
            for (int r = first + 1; r < end; ++r) sum[i] += smooth_input(r, t, i, 0);
          }
          std::vector<double> score(static_cast<size_t>(units), 0.0);
          for (size_t i = 0; i < n; ++i) {
            score[i / cols] += rows ? static_cast<double>(sum[i]) * sum[i] : std::fabs(sum[i]);
          }
          const std::vector<int64_t> top = naive_top_k(score, k);
          for (size_t i = 0; i < n; ++i) {
            const bool kept =
                std::binary_search(top.begin(), top.end(), static_cast<int64_t>(i) / cols);
            if (kept) expect[i] += static_cast<double>(sum[i]) / l.ranks;
            for (int r = first; r < end; ++r) {
              ASSERT_EQ(res[r].contribution[t][i], kept ? smooth_input(r, t, i, 0) : 0.0f)
                  << l.ranks << " ranks " << granularity << " tensor " << t << " rank " << r;
            }
          }
        }
        for (int r = 0; r < l.ranks; ++r) {
          ASSERT_TRUE(same_bits(res[r].output[t], res[0].output[t]));
          for (size_t i = 0; i < n; ++i) ASSERT_NEAR(res[r].output[t][i], expect[i], 1e-4);
        }
      }
    }
  }
}

TEST(TopK, RowGranularityKeepsWholeRowsOfLargestNorm) {
  std::vector<TensorSpec> tensors = {{"m", {20, 10}}};
  auto res =
      run_compressor(2, "topk", {"topk", 0.1, "none", "row"}, base_config(), tensors, smooth_input);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> norm(20, 0.0);
    for (size_t i = 0; i < 200; ++i) norm[i / 10] += std::pow(smooth_input(r, 0, i, 0), 2);
    EXPECT_EQ(nonzero_rows(res[r].contribution[0], 10), naive_top_k(norm, 2));
  }
}

TEST(RandK, SameIndicesOnEveryRankFreshEveryStep) {
  for (const char* granularity : {"element", "row"}) {
    std::vector<TensorSpec> tensors = {{"w", {50, 8}}};
    const CompressionSpec spec{"randk", 0.1, "none", granularity};
    auto one = run_compressor(3, "randk", spec, base_config(), tensors, smooth_input, 1);
    auto two = run_compressor(3, "randk", spec, base_config(), tensors, smooth_input, 2);
    std::set<size_t> picked_one, picked_two;
    for (size_t i = 0; i < 400; ++i) {
      if (one[0].output[0][i] != 0.0f) picked_one.insert(i);
      if (two[0].output[0][i] != 0.0f) picked_two.insert(i);
      // Output is the exact mean at the picked indices.
      if (one[0].output[0][i] != 0.0f) {
        EXPECT_NEAR(one[0].output[0][i], dense_mean(3, 0, i), 1e-5);
      }
    }
    EXPECT_EQ(picked_one.size(), std::string(granularity) == "row" ? 5u * 8 : 40u) << granularity;
    EXPECT_NE(picked_one, picked_two) << granularity;
    for (int r = 1; r < 3; ++r) {
      EXPECT_EQ(one[r].output[0], one[0].output[0]);
      for (size_t i = 0; i < 400; ++i) {
        EXPECT_EQ(one[r].contribution[0][i] != 0.0f, picked_one.count(i) == 1) << granularity;
      }
    }
  }
}

TEST(Fp16, WithinHalfPrecisionOfTheMean) {
  std::vector<TensorSpec> tensors = {{"a", {333}}, {"b", {4, 4}}};
  for (int world : {1, 2, 4, 7}) {
    auto res = run_compressor(world, "fp16", {"fp16", 1.0, "none", ""}, base_config(), tensors,
                              smooth_input);
    for (size_t t = 0; t < tensors.size(); ++t) {
      for (size_t i = 0; i < tensors[t].elements(); ++i) {
        const double want = dense_mean(world, t, i);
        // Inputs are below 10.1 in magnitude; pre-scaled values and world-1 partial sums are
        // each rounded to fp16 (unit roundoff 2^-11).
        EXPECT_NEAR(res[0].output[t][i], want, (world + 1) * 10.1 / 2048);
      }
      for (int r = 1; r < world; ++r) EXPECT_EQ(res[r].output[t], res[0].output[t]);
    }
  }
}

struct Variant {
  std::string compressor, granularity, ef;
};

class RatioOne : public ::testing::TestWithParam<Variant> {};

// With ratio 1 every compressor is the identity, so every error-feedback variant but ef21m
// reproduces the dense mean at every step; ef21m reproduces the mean of its momentum.
TEST_P(RatioOne, EqualsDenseMean) {
  const Variant v = GetParam();
  Config c = base_config();
  c.sketch_rank = 2;
  c.ef_momentum = 0.5;
  std::vector<TensorSpec> tensors = {{"w", {16, 12}}, {"bias", {9}}};
  const int world = 3, steps = 3;
  auto res = run_compressor(world, v.compressor, {v.compressor, 1.0, v.ef, v.granularity}, c,
                            tensors, smooth_input, steps);
  for (size_t t = 0; t < tensors.size(); ++t) {
    for (size_t i = 0; i < tensors[t].elements(); ++i) {
      double want = dense_mean(world, t, i, steps - 1);
      if (v.ef == "ef21m") {  // warm start: v = g, then v = 0.5 v + 0.5 g
        want = dense_mean(world, t, i, 0);
        for (int s = 1; s < steps; ++s) want = 0.5 * want + 0.5 * dense_mean(world, t, i, s);
      }
      ASSERT_NEAR(res[1].output[t][i], want, 1e-5) << v.compressor << "/" << v.ef << " t" << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllVariants, RatioOne, ::testing::ValuesIn([] {
                           std::vector<Variant> out;
                           for (auto [c, g] : std::vector<std::pair<std::string, std::string>>{
                                    {"arctopk", ""},
                                    {"topk", "element"},
                                    {"topk", "row"},
                                    {"randk", "element"},
                                    {"randk", "row"}}) {
                             for (std::string ef : {"none", "ef14", "ef21", "ef21m"})
                               out.push_back({c, g, ef});
                           }
                           return out;
                         }()),
                         [](const auto& info) {
                           return info.param.compressor + "_" +
                                  (info.param.granularity.empty() ? "x" : info.param.granularity) +
                                  "_" + info.param.ef;
                         });

}  // namespace
}  // namespace testing
}  // namespace arcreduce
