// Error-feedback invariants (specs/arc-top-k.md): ef14 conserves mass, ef21 keeps
// hbar == mean_i h_i, every rank holds the same hbar.
#include <gtest/gtest.h>

#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

Config config() {
  Config c;
  c.min_compress_elements = 0;
  c.sketch_rank = 2;
  c.ef_momentum = 0.3;
  return c;
}

const std::vector<TensorSpec> kTensors = {{"w", {40, 10}}, {"v", {30}}};

TEST(Ef14, ConservesMass) {
  for (const char* compressor : {"arctopk", "topk", "randk"}) {
    const int world = 4;
    std::vector<StateStore> stores(world);
    const CompressionSpec spec{compressor, 0.1, "ef14", "element"};
    run_compressor(world, compressor, spec, config(), kTensors, smooth_input, 2, &stores);
    std::vector<std::vector<std::vector<float>>> e_old(world);
    for (int r = 0; r < world; ++r) {
      for (const auto& t : kTensors) e_old[r].push_back(stores[r].get(t.name, t.elements()).e);
    }
    auto res =
        run_compressor(world, compressor, spec, config(), kTensors, smooth_input, 1, &stores);
    for (size_t t = 0; t < kTensors.size(); ++t) {
      for (size_t i = 0; i < kTensors[t].elements(); ++i) {
        double before = 0, after = res[0].output[t][i];
        for (int r = 0; r < world; ++r) {
          before += (smooth_input(r, t, i, 0) + e_old[r][t][i]) / world;
          after += stores[r].get(kTensors[t].name, kTensors[t].elements()).e[i] / world;
        }
        ASSERT_NEAR(after, before, 1e-4) << compressor << " tensor " << t << " element " << i;
      }
    }
  }
}

TEST(Ef21, GlobalEstimateIsTheMeanOfLocalEstimates) {
  for (const char* ef : {"ef21", "ef21m"}) {
    for (const char* init : {"warm", "zero"}) {
      const int world = 3;
      Config c = config();
      c.ef_init = init;
      std::vector<StateStore> stores(world);
      auto res = run_compressor(world, "arctopk", {"arctopk", 0.1, ef, ""}, c, kTensors,
                                smooth_input, 4, &stores);
      for (size_t t = 0; t < kTensors.size(); ++t) {
        const auto& name = kTensors[t].name;
        const size_t n = kTensors[t].elements();
        for (size_t i = 0; i < n; ++i) {
          double mean_h = 0;
          for (int r = 0; r < world; ++r) mean_h += stores[r].get(name, n).h[i] / world;
          ASSERT_NEAR(stores[0].get(name, n).hbar[i], mean_h, 1e-4) << ef << " " << init;
          ASSERT_EQ(res[0].output[t][i], stores[0].get(name, n).hbar[i]);
          for (int r = 1; r < world; ++r) {
            ASSERT_EQ(stores[r].get(name, n).hbar[i], stores[0].get(name, n).hbar[i]);
          }
        }
      }
    }
  }
}

TEST(Ef21, ColdStartBeginsFromZero) {
  Config c = config();
  c.ef_init = "zero";
  std::vector<StateStore> stores(2);
  // One step from zero with ratio 1: hbar = mean g exactly (the compressor is the identity).
  auto res = run_compressor(2, "randk", {"randk", 1.0, "ef21", "element"}, c, kTensors,
                            smooth_input, 1, &stores);
  for (size_t i = 0; i < 30; ++i) {
    EXPECT_NEAR(res[0].output[1][i], (smooth_input(0, 1, i, 0) + smooth_input(1, 1, i, 0)) / 2,
                1e-6);
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
