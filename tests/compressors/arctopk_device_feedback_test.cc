// The device pipeline (ARC-Top-K plan with error feedback, arctopk_device_feedback.h) run with
// the CPU kernels against the host pipeline (ErrorFeedback around ArcTopK) on loopback worlds:
// several steps with state carried between them, every error-feedback kind, warm and cold
// starts, world sizes 1 to 3, and the in-place case (output aliasing the gradient); efm with and
// without masking, with its warm-up, and with every row drawn at random or every row ranked.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <ostream>

#include "compressors/arctopk_device_feedback.h"
#include "tests/compressors/compressor_harness.h"

namespace arcreduce {
namespace testing {
namespace {

// One rank's device-pipeline state, as the CUDA executor keeps it (here in host memory).
struct FeedbackState {
  std::vector<float> e, h, hbar, v;
  bool started = false;
  uint64_t steps = 0;
};

using RankStates = std::map<std::string, FeedbackState>;

// `stores`, where given, carries each rank's state into a later call (another kind, as a per-op
// option may switch it). As the CUDA executor does, a kind is told its state did not start where
// the state lacks what it continues from (continues_state), and efm drops EF21's estimates.
std::vector<RankResult> run_pipeline(int world, const CompressionSpec& spec, const Config& config,
                                     const std::vector<TensorSpec>& tensors, const InputFn& input,
                                     int steps, bool in_place,
                                     std::vector<RankStates>* stores = nullptr) {
  std::vector<RankResult> results(world);
  std::vector<RankStates> local(world);
  std::vector<RankStates>& all = stores ? *stores : local;
  const FeedbackKind kind = feedback_kind(spec.error_feedback);
  const bool efm = kind == FeedbackKind::kEfm;
  run_ranks(world, [&](Communicator& comm) {
    const int rank = comm.rank();
    RankResult& res = results[rank];
    RankStates& states = all[rank];
    const FeedbackBuffers need = feedback_buffers(feedback_kind(spec.error_feedback));
    for (int step = 0; step < steps; ++step) {
      std::vector<std::vector<float>> in(tensors.size());
      res.output.assign(tensors.size(), {});
      res.contribution.assign(tensors.size(), {});
      std::vector<ArcFeedbackTensor> bucket(tensors.size());
      for (size_t t = 0; t < tensors.size(); ++t) {
        const size_t n = tensors[t].elements();
        in[t].resize(n);
        for (size_t i = 0; i < n; ++i) in[t][i] = input(rank, t, i, step);
        res.output[t].assign(n, std::nanf(""));
        FeedbackState& s = states[tensors[t].name];
        FeedbackBuffers held;
        held.e = s.e.size() == n;
        held.h = s.h.size() == n;
        held.hbar = s.hbar.size() == n;
        held.v = s.v.size() == n;
        const bool continues = continues_state(kind, held);
        if (need.e) s.e.resize(n, 0.0f);
        if (need.h) s.h.resize(n, 0.0f);
        if (need.hbar) s.hbar.resize(n, 0.0f);
        if (need.v) s.v.resize(n, 0.0f);
        ArcFeedbackTensor& c = bucket[t];
        c.name = tensors[t].name;
        c.shape = tensors[t].shape;
        c.elements = n;
        c.step = s.steps;
        c.input = in[t].data();
        c.output = in_place ? in[t].data() : res.output[t].data();
        c.e = s.e.data();
        c.h = s.h.data();
        c.hbar = s.hbar.data();
        c.v = s.v.data();
        c.started = s.started && continues;
      }
      const ArcFeedbackPlan p =
          plan_arc_feedback(bucket, compressor_options(config), spec, comm.size());
      std::vector<float> work(p.work_floats), warm(p.warm_floats), first(p.plan.first_floats),
          second(p.plan.second_floats), scratch(p.plan.scratch_floats);
      std::vector<int64_t> rows(p.plan.row_count);
      ArcTopKPlanBuffers buf{first.data(), second.data(), rows.data(), scratch.data()};
      CpuArcKernels k;
      run_arc_feedback(k, p, bucket, work.data(), warm.data(), buf, [&](float* data, size_t n) {
        comm.allreduce(data, n, ScalarType::kFloat32, CollectiveOp::kSum);
      });
      for (size_t t = 0; t < tensors.size(); ++t) {
        FeedbackState& s = states[tensors[t].name];
        s.started = true;
        ++s.steps;
        if (efm) {
          s.h.clear();
          s.hbar.clear();
        }
        if (in_place) res.output[t] = in[t];
      }
    }
  });
  return results;
}

void expect_same_outputs(const std::vector<RankResult>& want, const std::vector<RankResult>& got,
                         const std::string& what) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t rank = 0; rank < want.size(); ++rank) {
    for (size_t t = 0; t < want[rank].output.size(); ++t) {
      const auto& a = want[rank].output[t];
      const auto& b = got[rank].output[t];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_TRUE(same_bits(a, b)) << what << ": output of tensor " << t << " on rank " << rank;
    }
  }
}

const std::vector<TensorSpec>& bucket_shapes() {
  static const std::vector<TensorSpec> tensors = {
      {"fc.weight", {64, 32}},        // sketch path
      {"conv.weight", {8, 4, 3, 3}},  // N-D view
      {"small", {8, 4}},              // exact path
      {"bias", {5}},                  // dense mean
      {"empty", {0, 7}},              // 0 elements
      {"one", {1, 1}},                // 1 element
      {"tall", {300, 9}},             // sketch path
  };
  return tensors;
}

Config feedback_config(const std::string& init) {
  Config c;
  c.sketch_rank = 4;
  c.min_compress_elements = 0;
  c.seed = 5;
  c.ef_init = init;
  c.ef_momentum = 0.3;
  return c;
}

struct Case {
  int world;
  std::string ef;
  std::string init;
  // efm's settings: momentum-factor masking, warm-up steps, share of rows drawn at random.
  bool masking = true;
  int64_t warmup = 0;
  double random_rows = 0.5;
};

std::string describe(const Case& c) {
  std::string s = c.ef + "/" + c.init;
  if (c.ef == "efm") {
    s += std::string(c.masking ? " masking" : " no masking") + " warm-up " +
         std::to_string(c.warmup) + " random rows " + std::to_string(c.random_rows);
  }
  return s;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << describe(c) << " on " << c.world << " ranks";
}

class ArcFeedbackWorlds : public ::testing::TestWithParam<Case> {};

TEST_P(ArcFeedbackWorlds, MatchesTheHostPipelineOverSteps) {
  const Case c = GetParam();
  Config config = feedback_config(c.init);
  config.ef_masking = c.masking;
  config.warmup_steps = c.warmup;
  config.random_rows = c.random_rows;
  // 0.05: the velocity of row-selected tensors is masked (below the share eta = 0.3); 0.5: kept.
  for (double ratio : {0.05, 0.5}) {
    const CompressionSpec spec{"arctopk", ratio, c.ef, ""};
    for (int steps : {1, 2, 4}) {
      const std::string what = describe(c) + " ratio " + std::to_string(ratio) + " after " +
                               std::to_string(steps) + " steps";
      auto want =
          run_compressor(c.world, "arctopk", spec, config, bucket_shapes(), smooth_input, steps);
      auto got = run_pipeline(c.world, spec, config, bucket_shapes(), smooth_input, steps, false);
      expect_same_outputs(want, got, what);
      auto in_place =
          run_pipeline(c.world, spec, config, bucket_shapes(), smooth_input, steps, true);
      expect_same_outputs(want, in_place, what + " in place");
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  std::string name = c.ef + "_" + c.init;
  if (c.ef == "efm") {
    name += std::string(c.masking ? "_masking" : "_nomasking") + "_warmup" +
            std::to_string(c.warmup) + "_random" +
            std::to_string(static_cast<int>(c.random_rows * 100));
  }
  return name + "_np" + std::to_string(c.world);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ArcFeedbackWorlds,
    ::testing::Values(Case{1, "none", "warm"}, Case{2, "none", "warm"}, Case{3, "none", "warm"},
                      Case{1, "ef14", "warm"}, Case{2, "ef14", "warm"}, Case{3, "ef14", "warm"},
                      Case{2, "ef21", "warm"}, Case{3, "ef21", "warm"}, Case{2, "ef21", "zero"},
                      Case{1, "ef21m", "warm"}, Case{2, "ef21m", "warm"}, Case{3, "ef21m", "warm"},
                      Case{3, "ef21m", "zero"}, Case{1, "efm", "warm"}, Case{2, "efm", "warm"},
                      Case{3, "efm", "warm"}, Case{2, "efm", "warm", false},
                      Case{3, "efm", "warm", true, 2}, Case{2, "efm", "warm", false, 1},
                      Case{2, "efm", "warm", true, 0, 1.0}, Case{3, "efm", "warm", true, 0, 0.0}),
    case_name);

// One tensor's state continued by another kind (a per-op option switches it): efm after ef21m
// starts its velocity over (ef21m's v is a normalised average, not a velocity), EF21 after efm or
// ef14 starts over (no h and hbar), EF21M after EF21 too (no v); ef14 and efm keep e. The two
// pipelines stay equal across every switch.
TEST(ArcFeedbackSwitch, EachKindStartsOverWhereTheStateIsAnotherKinds) {
  Config config = feedback_config("warm");
  for (int world : {1, 3}) {
    std::vector<StateStore> host(world);
    std::vector<RankStates> device(world);
    const char* kinds[] = {"ef21m", "efm", "ef21m", "efm", "ef14", "ef21", "efm", "ef21m"};
    int phase = 0;
    for (const char* kind : kinds) {
      const CompressionSpec spec{"arctopk", 0.05, kind, ""};
      auto want =
          run_compressor(world, "arctopk", spec, config, bucket_shapes(), smooth_input, 2, &host);
      auto got =
          run_pipeline(world, spec, config, bucket_shapes(), smooth_input, 2, false, &device);
      expect_same_outputs(want, got,
                          "phase " + std::to_string(phase++) + " (" + kind + "), " +
                              std::to_string(world) + " ranks");
    }
  }
}

// Three 16 x 8 tensors "a", "b", "c", none started, at step 0.
std::vector<ArcFeedbackTensor> three_tensors() {
  std::vector<ArcFeedbackTensor> bucket(3);
  const char* names[] = {"a", "b", "c"};
  for (size_t i = 0; i < 3; ++i) {
    bucket[i].name = names[i];
    bucket[i].shape = {16, 8};
    bucket[i].elements = 128;
  }
  return bucket;
}

TEST(ArcFeedbackPlan, WarmStartsOnlyUnstartedEf21Tensors) {
  std::vector<ArcFeedbackTensor> bucket = three_tensors();
  bucket[1].started = true;
  const CompressionSpec spec{"arctopk", 0.1, "ef21m", ""};
  const ArcFeedbackPlan warm =
      plan_arc_feedback(bucket, compressor_options(feedback_config("warm")), spec, 2);
  EXPECT_EQ(warm.warm, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(warm.compressed, (std::vector<size_t>{1}));
  EXPECT_EQ(warm.warm_floats, 256u);
  EXPECT_EQ(warm.work_floats, 3u * 128u);
  EXPECT_FLOAT_EQ(warm.eta, 0.3f);
  const ArcFeedbackPlan cold =
      plan_arc_feedback(bucket, compressor_options(feedback_config("zero")), spec, 2);
  EXPECT_TRUE(cold.warm.empty());
  EXPECT_EQ(cold.compressed.size(), 3u);
  const ArcFeedbackPlan ef14 = plan_arc_feedback(
      bucket, compressor_options(feedback_config("warm")), {"arctopk", 0.1, "ef14", ""}, 2);
  EXPECT_TRUE(ef14.warm.empty());
  EXPECT_EQ(ef14.work_floats, 2u * 3u * 128u);
}

// efm's warm-up is its own (the whole x sent densely, by step count, started or not), it keeps
// one scratch copy (x lives in e), and it masks only where ErrorFeedback does.
TEST(ArcFeedbackPlan, EfmWarmsUpByStepAndMasksBelowTheShareEta) {
  std::vector<ArcFeedbackTensor> bucket = three_tensors();
  for (ArcFeedbackTensor& t : bucket) t.started = true;
  bucket[0].step = 0;
  bucket[1].step = 2;
  bucket[2].step = 1;
  Config config = feedback_config("warm");  // eta 0.3
  config.warmup_steps = 2;
  const ArcFeedbackPlan warm =
      plan_arc_feedback(bucket, compressor_options(config), {"arctopk", 0.1, "efm", ""}, 2);
  EXPECT_EQ(warm.warm, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(warm.compressed, (std::vector<size_t>{1}));
  EXPECT_EQ(warm.work_floats, 128u);
  EXPECT_FLOAT_EQ(warm.beta, 0.7f);
  EXPECT_EQ(warm.mask, (std::vector<bool>{true}));  // 1 row of 16 < 0.3 of the tensor

  config.warmup_steps = 0;
  const ArcFeedbackPlan half =
      plan_arc_feedback(bucket, compressor_options(config), {"arctopk", 0.5, "efm", ""}, 2);
  EXPECT_TRUE(half.warm.empty());
  EXPECT_EQ(half.mask, (std::vector<bool>(3, false)));  // 8 rows of 16 >= 0.3: velocity kept
  config.ef_masking = false;
  const ArcFeedbackPlan off =
      plan_arc_feedback(bucket, compressor_options(config), {"arctopk", 0.1, "efm", ""}, 2);
  EXPECT_EQ(off.mask, (std::vector<bool>(3, false)));
  EXPECT_TRUE(feedback_buffers(FeedbackKind::kEfm).e);
  EXPECT_TRUE(feedback_buffers(FeedbackKind::kEfm).v);
  EXPECT_FALSE(feedback_buffers(FeedbackKind::kEfm).h);
}

TEST(ArcFeedbackPlan, UnknownKindIsAnError) {
  try {
    feedback_kind("ef99");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ef99"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(feedback_buffers(FeedbackKind::kEf14).e);
  EXPECT_FALSE(feedback_buffers(FeedbackKind::kEf14).h);
  EXPECT_TRUE(feedback_buffers(FeedbackKind::kEf21m).v);
  EXPECT_FALSE(feedback_buffers(FeedbackKind::kEf21).v);
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
