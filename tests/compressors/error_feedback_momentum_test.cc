// efm: error feedback on the optimizer's momentum (error_feedback.h). Checked against naive
// references: heavy-ball momentum of the mean gradient at ratio 1 and during the warm-up,
// conservation of u + e, momentum-factor masking, and the state handed over from ef21m.
#include <gtest/gtest.h>

#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

Config config() {
  Config c;
  c.min_compress_elements = 0;
  c.sketch_rank = 2;
  c.ef_momentum = 0.25;  // beta 0.75
  c.ef_masking = false;  // the default is on; the masking test switches it on itself
  return c;
}

const std::vector<TensorSpec> kTensors = {{"w", {40, 10}}, {"v", {30}}};

// mean over ranks of the input at `step`.
double mean_input(int world, size_t t, size_t i, int step) {
  double m = 0;
  for (int r = 0; r < world; ++r) m += smooth_input(r, t, i, step);
  return m / world;
}

// Heavy-ball velocity of the mean gradient after steps 0..last: u = beta u + mean g.
double heavy_ball(int world, double beta, size_t t, size_t i, int last) {
  double u = 0;
  for (int s = 0; s <= last; ++s) u = beta * u + mean_input(world, t, i, s);
  return u;
}

TEST(Efm, RatioOneIsHeavyBallMomentumOfTheMean) {
  for (const char* compressor : {"arctopk", "randk", "topk"}) {
    for (int world : {1, 3}) {
      for (int steps : {1, 4}) {
        const Config c = config();
        auto res = run_compressor(world, compressor, {compressor, 1.0, "efm", "element"}, c,
                                  kTensors, smooth_input, steps);
        for (size_t t = 0; t < kTensors.size(); ++t) {
          for (size_t i = 0; i < kTensors[t].elements(); ++i) {
            const double want = heavy_ball(world, 0.75, t, i, steps - 1);
            for (int r = 0; r < world; ++r) {
              ASSERT_NEAR(res[r].output[t][i], want, 1e-4 * (1 + std::abs(want)))
                  << compressor << " world " << world << " steps " << steps << " rank " << r;
            }
          }
        }
      }
    }
  }
}

// mean_i (u_i + e_i) before the step's output is taken == output + mean_i e_i after, where u_i
// already holds this step's gradient: nothing is lost, only delayed.
TEST(Efm, ConservesVelocityPlusResidual) {
  for (const char* compressor : {"arctopk", "topk", "randk"}) {
    const int world = 4;
    std::vector<StateStore> stores(world);
    const CompressionSpec spec{compressor, 0.1, "efm", "element"};
    run_compressor(world, compressor, spec, config(), kTensors, smooth_input, 3, &stores);
    std::vector<std::vector<std::vector<float>>> e_old(world), u_old(world);
    for (int r = 0; r < world; ++r) {
      for (const auto& t : kTensors) {
        e_old[r].push_back(stores[r].get(t.name, t.elements()).e);
        u_old[r].push_back(stores[r].get(t.name, t.elements()).v);
      }
    }
    auto res =
        run_compressor(world, compressor, spec, config(), kTensors, smooth_input, 1, &stores);
    for (size_t t = 0; t < kTensors.size(); ++t) {
      for (size_t i = 0; i < kTensors[t].elements(); ++i) {
        double before = 0, after = res[0].output[t][i];
        for (int r = 0; r < world; ++r) {
          const TensorState& s = stores[r].get(kTensors[t].name, kTensors[t].elements());
          const double u = 0.75 * u_old[r][t][i] + smooth_input(r, t, i, 0);
          ASSERT_NEAR(s.v[i], u, 1e-5) << compressor << " rank " << r;  // no masking by default
          before += (u + e_old[r][t][i]) / world;
          after += s.e[i] / world;
        }
        ASSERT_NEAR(after, before, 1e-4) << compressor << " tensor " << t << " element " << i;
      }
    }
  }
}

TEST(Efm, WarmUpSendsTheWholeVelocity) {
  Config c = config();
  c.warmup_steps = 2;
  const int world = 3;
  const CompressionSpec spec{"arctopk", 0.1, "efm", ""};
  for (int steps : {1, 2}) {
    std::vector<StateStore> stores(world);
    auto res = run_compressor(world, "arctopk", spec, c, kTensors, smooth_input, steps, &stores);
    for (size_t t = 0; t < kTensors.size(); ++t) {
      for (size_t i = 0; i < kTensors[t].elements(); ++i) {
        const double want = heavy_ball(world, 0.75, t, i, steps - 1);
        ASSERT_NEAR(res[1].output[t][i], want, 1e-4 * (1 + std::abs(want))) << "steps " << steps;
        ASSERT_EQ(stores[1].get(kTensors[t].name, kTensors[t].elements()).e[i], 0.0f);
      }
    }
  }
  // The third step compresses: most rows of w are not sent and keep a residual.
  std::vector<StateStore> stores(world);
  auto res = run_compressor(world, "arctopk", spec, c, kTensors, smooth_input, 3, &stores);
  const auto rows = nonzero_rows(res[0].output[0], 10);
  EXPECT_EQ(rows.size(), 4u);  // k = 0.1 * 40
  size_t residual = 0;
  for (float e : stores[0].get("w", 400).e) residual += e != 0.0f;
  EXPECT_EQ(residual, 400u - 4u * 10u);
}

TEST(Efm, MaskingClearsTheVelocityWhereItWasSent) {
  Config c = config();
  c.ef_masking = true;
  const int world = 2;
  std::vector<StateStore> stores(world);
  auto res = run_compressor(world, "arctopk", {"arctopk", 0.1, "efm", ""}, c, kTensors,
                            smooth_input, 2, &stores);
  for (int r = 0; r < world; ++r) {
    const TensorState& s = stores[r].get("w", 400);
    const auto sent = nonzero_rows(res[r].contribution[0], 10);
    ASSERT_EQ(sent.size(), 4u);
    for (int64_t row = 0; row < 40; ++row) {
      const bool was_sent = std::find(sent.begin(), sent.end(), row) != sent.end();
      for (int64_t col = 0; col < 10; ++col) {
        const float u = s.v[static_cast<size_t>(row * 10 + col)];
        if (was_sent) {
          ASSERT_EQ(u, 0.0f) << "rank " << r << " row " << row;
        } else {
          ASSERT_NE(u, 0.0f) << "rank " << r << " row " << row;
        }
      }
    }
  }
}

// With masking on, ARC-Top-K at ratio 1 sends every row of the matrix each step, a share above
// eta: its velocity is kept, and the output is heavy-ball momentum of the mean as without masking
// (error_feedback.cc). At ratio 0.3 (12 of 40 rows, eta 0.25) the velocity is kept too.
TEST(Efm, MaskingSparesTensorsThatSendAtLeastEta) {
  Config c = config();
  c.ef_masking = true;
  for (int world : {1, 3}) {
    for (int steps : {1, 4}) {
      auto res = run_compressor(world, "arctopk", {"arctopk", 1.0, "efm", ""}, c, kTensors,
                                smooth_input, steps);
      for (size_t i = 0; i < kTensors[0].elements(); ++i) {
        const double want = heavy_ball(world, 0.75, 0, i, steps - 1);
        for (int r = 0; r < world; ++r) {
          ASSERT_NEAR(res[r].output[0][i], want, 1e-4 * (1 + std::abs(want)))
              << "world " << world << " steps " << steps << " rank " << r;
        }
      }
    }
  }
  const int world = 2;
  std::vector<StateStore> stores(world);
  auto res = run_compressor(world, "arctopk", {"arctopk", 0.3, "efm", ""}, c, kTensors,
                            smooth_input, 2, &stores);
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(nonzero_rows(res[r].contribution[0], 10).size(), 12u);
    for (float u : stores[r].get("w", 400).v) ASSERT_NE(u, 0.0f) << "rank " << r;
  }
}

TEST(Efm, StartsItsVelocityOverAfterEf21m) {
  const int world = 2;
  std::vector<StateStore> stores(world);
  run_compressor(world, "randk", {"randk", 1.0, "ef21m", "element"}, config(), kTensors,
                 smooth_input, 2, &stores);
  auto res = run_compressor(world, "randk", {"randk", 1.0, "efm", "element"}, config(), kTensors,
                            smooth_input, 1, &stores);
  for (size_t t = 0; t < kTensors.size(); ++t) {
    for (size_t i = 0; i < kTensors[t].elements(); ++i) {
      // A fresh velocity: u = g, so the output is the mean gradient of this step.
      ASSERT_NEAR(res[0].output[t][i], mean_input(world, t, i, 0), 1e-5);
    }
    EXPECT_TRUE(stores[0].get(kTensors[t].name, kTensors[t].elements()).h.empty());
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
