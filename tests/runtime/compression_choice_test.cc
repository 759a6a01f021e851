// ARCREDUCE_AUTO_COMPRESS: CompressionChoice's schedule and rule on a clock of the test's own,
// and the whole runtime over the loopback world, where every rank must take the same decision
// in the same cycle and keep bit-identical replicas through the switch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/compression_choice.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using Mode = CompressionChoice::Mode;
using Holding = CompressionChoice::Holding;
constexpr int kTrial = CompressionChoice::kTrialSteps;

// Runs buckets of "c" (the clock: the first name of the first bucket) and then "other" (never
// the clock) through `choice` for `steps` steps, a step taking compressed_ms or dense_ms by the
// mode in effect.
void run_steps(CompressionChoice& choice, int steps, double compressed_ms, double dense_ms,
               Clock::time_point* t) {
  const std::string c = "c", other = "other";
  for (int i = 0; i < steps; ++i) {
    const double ms = choice.mode() == Mode::kDense ? dense_ms : compressed_ms;
    choice.executed({&c, &other}, *t);
    *t += std::chrono::microseconds(static_cast<int64_t>(ms * 1000));
    choice.executed({&other}, *t - std::chrono::microseconds(1));  // does not tick the clock
  }
}

TEST(CompressionChoice, ScheduleThenTheAgreedDecision) {
  for (const auto& [dense_ms, compress] : {std::pair{40.0, true}, std::pair{20.0, false}}) {
    run_ranks(2, [&, dense_ms = dense_ms, compress = compress](Communicator& comm) {
      CompressionChoice choice(true);
      EXPECT_STREQ(choice.state(), "off");
      EXPECT_EQ(choice.holding(), Holding::kOwn);  // nothing automatic has run yet
      EXPECT_FALSE(choice.pending());
      Clock::time_point t{};
      std::vector<Mode> modes;
      const std::string c = "c";
      choice.executed({&c}, t);  // the clock starts
      EXPECT_STREQ(choice.state(), "trial");
      for (int i = 1; i < kTrial; ++i) {
        modes.push_back(choice.mode());
        EXPECT_FALSE(choice.ready()) << i;
        t += std::chrono::milliseconds(modes.back() == Mode::kDense ? static_cast<int>(dense_ms)
                                                                    : 10);
        choice.executed({&c}, t);
      }
      // Dense first, then compressed, timed on the steps in between.
      const int compressed_from = CompressionChoice::kDenseTrialSteps;
      for (int i = 1; i < kTrial; ++i) {
        EXPECT_EQ(modes[i - 1], i < compressed_from ? Mode::kDense : Mode::kCompressed) << i;
      }
      ASSERT_TRUE(choice.trial().done);
      EXPECT_DOUBLE_EQ(choice.trial().compressed_median_ms, 10.0);
      EXPECT_DOUBLE_EQ(choice.trial().dense_median_ms, dense_ms);
      EXPECT_TRUE(choice.ready());
      EXPECT_EQ(choice.mode(), Mode::kDense);  // until the decision: dense
      EXPECT_EQ(choice.holding(), Holding::kNever);
      choice.decide(comm, comm.rank(), comm.size(), make_logger(comm.rank(), "error"));
      EXPECT_TRUE(choice.decided());
      EXPECT_FALSE(choice.ready());
      EXPECT_EQ(choice.compressing(), compress);
      EXPECT_EQ(choice.mode(), compress ? Mode::kCompressed : Mode::kDense);
      EXPECT_EQ(choice.holding(), compress ? Holding::kOwn : Holding::kNever);
      EXPECT_STREQ(choice.state(), compress ? "compressed" : "dense");
    });
  }
}

// A bucket's mode follows the step its first member is in, not the clock's count: a tensor of
// the trial's last compressed step that runs after the clock's bucket (or after the decision) is
// still compressed, one of the step after it goes as decided.
TEST(CompressionChoice, ABucketGoesByItsOwnStep) {
  for (const auto& [dense_ms, compress] : {std::pair{40.0, true}, std::pair{20.0, false}}) {
    run_ranks(2, [&, dense_ms = dense_ms, compress = compress](Communicator& comm) {
      CompressionChoice choice(true);
      const uint64_t dense_to = CompressionChoice::kDenseTrialSteps;
      for (uint64_t n = 0; n < static_cast<uint64_t>(kTrial); ++n) {
        EXPECT_EQ(choice.mode_at(n), n < dense_to ? Mode::kDense : Mode::kCompressed) << n;
      }
      Clock::time_point t{};
      run_steps(choice, kTrial, 10, dense_ms, &t);  // the clock's last trial step has run
      ASSERT_TRUE(choice.ready());
      EXPECT_EQ(choice.mode(), Mode::kDense);  // the clock's interval: pending
      const uint64_t last = kTrial - 1;        // the step the others are still in
      EXPECT_EQ(choice.mode_at(last), Mode::kCompressed);
      EXPECT_EQ(choice.mode_at(last + 1), Mode::kDense);  // pending: dense
      choice.decide(comm, comm.rank(), comm.size(), make_logger(comm.rank(), "error"));
      ASSERT_EQ(choice.compressing(), compress);
      EXPECT_EQ(choice.mode_at(last), Mode::kCompressed);
      EXPECT_EQ(choice.mode_at(0), Mode::kDense);  // a tensor first reduced late: its own trial
      const Mode decided = compress ? Mode::kCompressed : Mode::kDense;
      EXPECT_EQ(choice.mode_at(last + 1), decided);
      EXPECT_EQ(choice.mode_at(last + 1000), decided);
    });
  }
  CompressionChoice off(false);
  EXPECT_EQ(off.mode_at(0), Mode::kCompressed);
}

TEST(CompressionChoice, TheRule) {
  EXPECT_TRUE(CompressionChoice::compression_pays(10, 30));
  EXPECT_FALSE(CompressionChoice::compression_pays(10, 29.9));
  EXPECT_FALSE(CompressionChoice::compression_pays(0, 100));  // nothing measured
  CompressionChoice off(false);
  EXPECT_EQ(off.mode(), Mode::kCompressed);
  EXPECT_EQ(off.holding(), Holding::kOwn);
  EXPECT_FALSE(off.pending());
  EXPECT_STREQ(off.state(), "off");
}

// The ranks' medians are averaged: one rank's slow dense steps alone decide for all.
TEST(CompressionChoice, RanksAverageTheirMedians) {
  run_ranks(3, [&](Communicator& comm) {
    CompressionChoice choice(true);
    Clock::time_point t{};
    // Dense 25 ms on ranks 0 and 1, 70 ms on rank 2: the mean, 40 ms, is 4x the 10 ms.
    run_steps(choice, kTrial + 1, 10, comm.rank() == 2 ? 70 : 25, &t);
    ASSERT_TRUE(choice.ready());
    choice.decide(comm, comm.rank(), comm.size(), make_logger(comm.rank(), "error"));
    EXPECT_TRUE(choice.compressing());
    EXPECT_DOUBLE_EQ(choice.agreed_dense_ms(), 40.0);
  });
}

Config automatic_config() {
  Config c = test_config();
  c.compressor = "arctopk";
  c.error_feedback = "efm";
  c.min_compress_elements = 0;
  c.auto_compress = true;
  return c;
}

// Through the runtime: every rank reaches the same decision, the switch happens in the same
// cycle everywhere (replicas bit-identical at every step), Stats says so, and a tensor that
// chose its own compression is never switched.
TEST(CompressionChoice, EveryRankSwitchesTogetherWithIdenticalReplicas) {
  for (int size : {2, 3}) {
    const int steps = kTrial + 8;
    std::vector<std::vector<std::vector<float>>> results(size);  // [rank][step] = w's output
    std::vector<std::string> states(size);
    std::vector<uint64_t> chosen_dense(size);
    LoopbackWorld world(size);
    run_runtimes(world, std::vector<Config>(size, automatic_config()), [&](Runtime& rt, int r) {
      std::vector<float> w(64 * 32), own(64 * 32);
      AllreduceOptions fixed;
      fixed.compression.ratio = 0.25;  // its own ratio: not automatic
      for (int s = 0; s < steps; ++s) {
        for (size_t i = 0; i < w.size(); ++i) {
          w[i] = static_cast<float>(std::sin(0.37 * i + s) * (r + 1));
          own[i] = w[i];
        }
        Handle h1 = rt.allreduce_async("w", Tensor{w.data(), DType::kFloat32, {64, 32}}, {});
        Handle h2 = rt.allreduce_async("own", Tensor{own.data(), DType::kFloat32, {64, 32}}, fixed);
        ASSERT_TRUE(rt.synchronize(h1).ok());
        ASSERT_TRUE(rt.synchronize(h2).ok());
        results[r].push_back(w);
      }
      const Stats st = rt.stats();
      states[r] = st.auto_compression;
      chosen_dense[r] = st.compressors.at("arctopk").warmup_tensors;
    });
    for (int r = 1; r < size; ++r) {
      EXPECT_EQ(states[r], states[0]);
      for (int s = 0; s < steps; ++s) {
        ASSERT_EQ(results[r][s], results[0][s]) << "rank " << r << " step " << s;
      }
    }
    EXPECT_THAT(states[0], ::testing::AnyOf("dense", "compressed"));
    // The trial's dense steps at least, and only "w"'s: "own" chose its ratio.
    EXPECT_GE(chosen_dense[0], static_cast<uint64_t>(CompressionChoice::kDenseTrialSteps));
    EXPECT_LE(chosen_dense[0], static_cast<uint64_t>(steps));
  }
}

// save_state() after the decision, load_state() into new runtimes: they go on as decided, bit
// for bit as the runtimes that were never stopped (no fusion: a fused bucket depends on timing).
TEST(CompressionChoice, ResumesAsDecided) {
  const int size = 2, saved_at = kTrial + 4, steps = kTrial + 10;
  Config config = automatic_config();
  config.fusion_threshold = 0;
  const std::string prefix = ::testing::TempDir() + "choice_resume";
  auto input = [](int r, int s, std::vector<float>* w) {
    for (size_t i = 0; i < w->size(); ++i) {
      (*w)[i] = static_cast<float>(std::cos(0.11 * i + 0.7 * s) * (r + 1));
    }
  };
  std::vector<std::vector<std::vector<float>>> straight(size), resumed(size);
  std::vector<std::string> decided(size), after_load(size);
  {
    LoopbackWorld world(size);
    run_runtimes(world, std::vector<Config>(size, config), [&](Runtime& rt, int r) {
      std::vector<float> w(64 * 32);
      for (int s = 0; s < steps; ++s) {
        if (s == saved_at) rt.save_state(prefix + std::to_string(r));
        input(r, s, &w);
        ASSERT_TRUE(
            rt.synchronize(rt.allreduce_async("w", Tensor{w.data(), DType::kFloat32, {64, 32}}, {}))
                .ok());
        straight[r].push_back(w);
      }
      decided[r] = rt.stats().auto_compression;
    });
  }
  {
    LoopbackWorld world(size);
    run_runtimes(world, std::vector<Config>(size, config), [&](Runtime& rt, int r) {
      rt.load_state(prefix + std::to_string(r));
      std::vector<float> w(64 * 32);
      for (int s = saved_at; s < steps; ++s) {
        input(r, s, &w);
        ASSERT_TRUE(
            rt.synchronize(rt.allreduce_async("w", Tensor{w.data(), DType::kFloat32, {64, 32}}, {}))
                .ok());
        resumed[r].push_back(w);
      }
      after_load[r] = rt.stats().auto_compression;
    });
  }
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(after_load[r], decided[r]);
    for (int s = saved_at; s < steps; ++s) {
      ASSERT_EQ(resumed[r][s - saved_at], straight[r][s]) << "rank " << r << " step " << s;
    }
    std::remove((prefix + std::to_string(r)).c_str());
  }
}

// A resumed job whose first bucket is not the saved clock ("b" before "a" here; under DDP or
// in dense buckets the order in which backward delivers them is not fixed) still goes on as
// decided: the record is found in whichever tensor's state holds it, not only the first
// bucket's, and each tensor goes by the step it is in, not by where the clock's count stands.
void resume_with_the_other_order(int saved_at) {
  SCOPED_TRACE("saved at step " + std::to_string(saved_at));
  const int size = 2, steps = kTrial + 8;
  Config config = automatic_config();
  config.fusion_threshold = 0;
  const std::string prefix = ::testing::TempDir() + "choice_resume_order";
  auto input = [](int r, int s, int t, std::vector<float>* w) {
    for (size_t i = 0; i < w->size(); ++i) {
      (*w)[i] = static_cast<float>(std::cos(0.13 * i + 0.5 * s + t) * (r + 1));
    }
  };
  // One step: both tensors in `order`, each synchronized before the next (a bucket each).
  auto step = [&](Runtime& rt, int r, int s, const std::vector<int>& order,
                  std::vector<std::vector<float>>* w) {
    for (int t : order) {
      input(r, s, t, &(*w)[t]);
      const std::string name = t == 0 ? "a" : "b";
      Handle h = rt.allreduce_async(name, Tensor{(*w)[t].data(), DType::kFloat32, {64, 32}}, {});
      ASSERT_TRUE(rt.synchronize(h).ok());
    }
  };
  std::vector<std::vector<std::vector<std::vector<float>>>> straight(size), resumed(size);
  std::vector<std::string> decided(size), after_load(size);
  {
    LoopbackWorld world(size);
    run_runtimes(world, std::vector<Config>(size, config), [&](Runtime& rt, int r) {
      std::vector<std::vector<float>> w(2, std::vector<float>(64 * 32));
      for (int s = 0; s < steps; ++s) {
        if (s == saved_at) rt.save_state(prefix + std::to_string(r));
        step(rt, r, s, {0, 1}, &w);  // "a" first: the clock
        straight[r].push_back(w);
      }
      decided[r] = rt.stats().auto_compression;
    });
  }
  {
    LoopbackWorld world(size);
    run_runtimes(world, std::vector<Config>(size, config), [&](Runtime& rt, int r) {
      rt.load_state(prefix + std::to_string(r));
      std::vector<std::vector<float>> w(2, std::vector<float>(64 * 32));
      for (int s = saved_at; s < steps; ++s) {
        step(rt, r, s, {1, 0}, &w);  // "b" first
        resumed[r].push_back(w);
      }
      after_load[r] = rt.stats().auto_compression;
    });
  }
  for (int r = 0; r < size; ++r) {
    ASSERT_THAT(decided[r], ::testing::AnyOf("dense", "compressed"));
    EXPECT_EQ(after_load[r], decided[r]) << "rank " << r << ": the trial ran again";
    for (int s = saved_at; s < steps; ++s) {
      ASSERT_EQ(resumed[r][s - saved_at], straight[r][s]) << "rank " << r << " step " << s;
    }
    std::remove((prefix + std::to_string(r)).c_str());
  }
}

TEST(CompressionChoice, ResumesAsDecidedWhenTheFirstBucketIsNotTheClock) {
  // After the decision, and in the trial's last step (there the resumed job's own timing joins
  // the medians; on the loopback world the dense step is never 3x the compressed one, so both
  // decide dense).
  for (const int saved_at : {kTrial + 3, kTrial - 1}) {
    resume_with_the_other_order(saved_at);
  }
}

TEST(CompressionChoice, ExplicitSettingsTurnItOff) {
  ::setenv("ARCREDUCE_COMPRESSOR", "topk", 1);
  EXPECT_FALSE(Config::from_env().auto_compress);
  ::setenv("ARCREDUCE_AUTO_COMPRESS", "1", 1);
  EXPECT_TRUE(Config::from_env().auto_compress);
  ::unsetenv("ARCREDUCE_COMPRESSOR");
  ::unsetenv("ARCREDUCE_AUTO_COMPRESS");
  EXPECT_TRUE(Config::from_env().auto_compress);
  ::setenv("ARCREDUCE_COMPRESS_RATIO", "0.05", 1);
  EXPECT_FALSE(Config::from_env().auto_compress);
  ::unsetenv("ARCREDUCE_COMPRESS_RATIO");
  ::setenv("ARCREDUCE_PRESET", "paper", 1);
  EXPECT_FALSE(Config::from_env().auto_compress);
  ::setenv("ARCREDUCE_PRESET", "default", 1);
  EXPECT_TRUE(Config::from_env().auto_compress);
  ::unsetenv("ARCREDUCE_PRESET");
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
