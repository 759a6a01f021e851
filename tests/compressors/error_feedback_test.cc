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

// A tensor whose state ef14 started (e only, no h or hbar) and that is then reduced with EF21
// (another per-op option, or an ef14 state file loaded into an ef21 job) starts EF21 over
// instead of using buffers it does not have (a heap overflow before).
TEST(Ef21, ContinuesFromAnEf14State) {
  for (const char* ef : {"ef21", "ef21m"}) {
    const int world = 2;
    std::vector<StateStore> stores(world);
    run_compressor(world, "topk", {"topk", 0.1, "ef14", "element"}, config(), kTensors,
                   smooth_input, 1, &stores);
    auto res = run_compressor(world, "topk", {"topk", 0.1, ef, "element"}, config(), kTensors,
                              smooth_input, 2, &stores);
    for (size_t t = 0; t < kTensors.size(); ++t) {
      const size_t n = kTensors[t].elements();
      const TensorState& s0 = stores[0].get(kTensors[t].name, n);
      ASSERT_EQ(s0.h.size(), n) << ef;
      ASSERT_EQ(s0.hbar.size(), n) << ef;
      for (size_t i = 0; i < n; ++i) {
        double mean_h = 0;
        for (int r = 0; r < world; ++r) mean_h += stores[r].get(kTensors[t].name, n).h[i] / world;
        ASSERT_NEAR(s0.hbar[i], mean_h, 1e-4) << ef << " tensor " << t << " element " << i;
        ASSERT_EQ(res[0].output[t][i], s0.hbar[i]) << ef;
      }
    }
  }
}

// Hides accepts_lazy_input(), so the decorator hands the wrapped compressor a stored difference.
class EagerOnly : public Compressor {
 public:
  explicit EagerOnly(std::unique_ptr<Compressor> inner) : inner_(std::move(inner)) {}
  void reduce(std::vector<CompressTensor>& bucket, CompressContext& ctx) override {
    for (const CompressTensor& t : bucket) EXPECT_EQ(t.lazy, nullptr) << t.name;
    inner_->reduce(bucket, ctx);
  }

 private:
  std::unique_ptr<Compressor> inner_;
};

// One run of ARC-Top-K under error feedback `ef` on `world` ranks for `steps` steps, with its
// lazy input hidden (eager) or not: each rank's outputs and contributions of the last step, and
// the stores. In place, the output is the gradient's memory, as the runtime reduces fp32, and no
// contribution is asked for (as the runtime asks none); otherwise both are separate buffers.
struct ArcRun {
  std::vector<std::vector<std::vector<float>>> out, own;  // [rank][tensor]
  std::vector<StateStore> stores;
};
ArcRun run_arc(int world, int steps, const char* ef, const Config& c, const CompressionSpec& spec,
               const std::vector<TensorSpec>& tensors, bool eager, bool in_place) {
  ArcRun run;
  run.out.assign(world, {});
  run.own.assign(world, {});
  run.stores = std::vector<StateStore>(world);
  const CompressorOptions options = compressor_options(c);
  run_ranks(world, [&](Communicator& comm) {
    const int rank = comm.rank();
    StateStore& store = run.stores[rank];
    std::unique_ptr<Compressor> inner = make_compressor("arctopk");
    if (eager) inner = std::make_unique<EagerOnly>(std::move(inner));
    auto pipeline = with_error_feedback(std::move(inner), ef, store);
    CompressorStats stats;
    Logger log = make_logger(rank, "error");
    for (int step = 0; step < steps; ++step) {
      auto& data = run.out[rank];
      auto& mine = run.own[rank];
      std::vector<std::vector<float>> in(tensors.size());
      data.assign(tensors.size(), {});
      mine.assign(tensors.size(), {});
      std::vector<CompressTensor> bucket(tensors.size());
      for (size_t t = 0; t < tensors.size(); ++t) {
        const size_t n = tensors[t].elements();
        for (size_t i = 0; i < n; ++i) in[t].push_back(smooth_input(rank, t, i, step));
        data[t] = in_place ? in[t] : std::vector<float>(n, std::nanf(""));
        mine[t].assign(n, std::nanf(""));
        CompressTensor& b = bucket[t];
        b.name = tensors[t].name;
        b.shape = tensors[t].shape;
        b.elements = n;
        b.step = store.get(b.name, n).compressed_steps;
        b.output = data[t].data();
        b.input = in_place ? b.output : in[t].data();
        b.contribution = in_place ? nullptr : mine[t].data();
      }
      CompressContext ctx{comm, options, spec, stats, log};
      pipeline->reduce(bucket, ctx);
      for (const auto& t : tensors) ++store.get(t.name, t.elements()).compressed_steps;
    }
  });
  return run;
}

// ARC under EF21/EF21M takes its input lazily (the difference is streamed while it is sketched,
// and the output starts as the old hbar in the same pass). That must change nothing: outputs and
// state equal, bit for bit, those of the stored-difference path, with the output reduced in
// place over the gradient as the runtime does, on all three ARC paths and both starts.
TEST(Ef21, LazyDifferenceMatchesStoredDifference) {
  // sketch path (r < cols), exact path (cols <= r), dense fallback (1-D).
  const std::vector<TensorSpec> tensors = {{"sketch", {40, 10}}, {"exact", {25, 2}}, {"bias", {7}}};
  for (const char* ef : {"ef21", "ef21m"}) {
    for (const char* init : {"warm", "zero"}) {
      Config c = config();
      c.ef_init = init;
      const int world = 3, steps = 4;
      const CompressionSpec spec{"arctopk", 0.2, ef, ""};
      ArcRun lazy = run_arc(world, steps, ef, c, spec, tensors, false, true);
      ArcRun eager = run_arc(world, steps, ef, c, spec, tensors, true, true);
      for (int r = 0; r < world; ++r) {
        ASSERT_EQ(lazy.out[r], eager.out[r]) << ef << " " << init << " rank " << r;
        for (const auto& t : tensors) {
          const TensorState& a = lazy.stores[r].get(t.name, t.elements());
          const TensorState& b = eager.stores[r].get(t.name, t.elements());
          EXPECT_EQ(a.h, b.h) << ef << " " << init << " " << t.name;
          EXPECT_EQ(a.hbar, b.hbar) << ef << " " << init << " " << t.name;
          EXPECT_EQ(a.v, b.v) << ef << " " << init << " " << t.name;
        }
      }
      // Every rank holds the same result.
      for (int r = 1; r < world; ++r) EXPECT_EQ(lazy.out[r], lazy.out[0]);
    }
  }
}

// ARC under ef14 and efm takes its input lazily too (x = g + e, or u = beta u + g and x = u + e,
// formed while it is sketched, and the output zeroed in the same pass). Outputs, contributions
// and state must equal, bit for bit, those of the stored path, with the output reduced in place
// over the gradient as the runtime does and without, with and without momentum-factor masking,
// through efm's dense warm-up, on all three ARC paths.
TEST(Ef14, LazyAccumulationMatchesStoredAccumulation) {
  const std::vector<TensorSpec> tensors = {{"sketch", {40, 10}}, {"exact", {25, 2}}, {"bias", {7}}};
  for (const char* ef : {"ef14", "efm"}) {
    for (bool masking : {false, true}) {
      for (bool in_place : {false, true}) {
        Config c = config();
        c.ef_masking = masking;
        c.warmup_steps = 1;  // efm's first step is its dense warm-up
        const int world = 3, steps = 4;
        const CompressionSpec spec{"arctopk", 0.2, ef, ""};
        ArcRun lazy = run_arc(world, steps, ef, c, spec, tensors, false, in_place);
        ArcRun eager = run_arc(world, steps, ef, c, spec, tensors, true, in_place);
        const std::string what =
            std::string(ef) + (masking ? " masking" : "") + (in_place ? " in place" : " separate");
        for (int r = 0; r < world; ++r) {
          ASSERT_EQ(lazy.out[r], eager.out[r]) << what << " rank " << r;
          if (!in_place) {
            for (size_t t = 0; t < tensors.size(); ++t) {
              ASSERT_TRUE(same_bits(lazy.own[r][t], eager.own[r][t])) << what << " rank " << r;
            }
          }
          for (const auto& t : tensors) {
            const TensorState& a = lazy.stores[r].get(t.name, t.elements());
            const TensorState& b = eager.stores[r].get(t.name, t.elements());
            EXPECT_EQ(a.e, b.e) << what << " " << t.name;
            EXPECT_EQ(a.v, b.v) << what << " " << t.name;
          }
        }
        // Every rank holds the same result, and the sketched tensor is row-sparse.
        for (int r = 1; r < world; ++r) EXPECT_EQ(lazy.out[r], lazy.out[0]) << what;
        EXPECT_EQ(nonzero_rows(lazy.out[0][0], 10).size(), 8u) << what;  // k = 0.2 * 40
      }
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
