// Compressed reductions through the whole runtime: every dtype, warm-up, stats, and save/load of
// compressor state with a bit-exact resume.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include <cstdio>
#include <fstream>

#include "runtime/step_batcher.h"
#include "tests/runtime/loopback_harness.h"
#include "tests/runtime/reference.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

Config compressed_config() {
  Config c = test_config();
  c.compressor = "arctopk";
  c.compress_ratio = 0.25;
  c.error_feedback = "ef21m";
  c.min_compress_elements = 0;
  c.sketch_rank = 2;
  return c;
}

// One step: every rank reduces three tensors with its step-dependent input; returns the outputs.
// `gap`: a pause before each tensor after the first, as backward takes between gradients.
std::vector<std::vector<double>> step(Runtime& rt, int rank, int s, DType dtype = DType::kFloat32,
                                      const AllreduceOptions& options = {},
                                      std::chrono::milliseconds gap = {}) {
  const std::vector<std::vector<int64_t>> shapes = {{32, 8}, {16}, {4, 6, 2, 2}};
  std::vector<HostTensor> tensors;
  std::vector<Handle> handles;
  for (size_t t = 0; t < shapes.size(); ++t) tensors.emplace_back(dtype, shapes[t]);
  for (size_t t = 0; t < shapes.size(); ++t) {
    for (size_t i = 0; i < tensors[t].count(); ++i) {
      tensors[t].set(i, input_value(rank, static_cast<int>(t) + 3 * s, i));
    }
    if (t > 0 && gap.count() > 0) std::this_thread::sleep_for(gap);
    handles.push_back(rt.allreduce_async("t" + std::to_string(t), tensors[t].view(), options));
  }
  std::vector<std::vector<double>> out;
  for (size_t t = 0; t < shapes.size(); ++t) {
    Status st = rt.synchronize(handles[t]);
    EXPECT_TRUE(st.ok()) << st.message();
    out.emplace_back();
    for (size_t i = 0; i < tensors[t].count(); ++i) out.back().push_back(tensors[t].get(i));
  }
  return out;
}

TEST(Compressed, EveryDtypeRatioOneEqualsDense) {
  for (DType dtype : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16}) {
    for (const char* compressor : {"arctopk", "topk", "randk", "fp16"}) {
      Config c = compressed_config();
      c.compress_ratio = 1.0;
      c.error_feedback = "ef14";
      c.compressor = compressor;
      run_runtimes(3, c, [&](Runtime& rt, int rank) {
        for (int s = 0; s < 2; ++s) {
          auto out = step(rt, rank, s, dtype);
          for (size_t t = 0; t < out.size(); ++t) {
            for (size_t i = 0; i < out[t].size(); ++i) {
              const double want =
                  expected_value(3, static_cast<int>(t) + 3 * s, i, ReduceOp::kAverage);
              ASSERT_NEAR(out[t][i], want, tolerance(dtype, 3, 16) + 16.0 / 1024)
                  << compressor << " " << dtype_name(dtype);
            }
          }
        }
        EXPECT_EQ(rt.stats().compressors.at(compressor).tensors, 6u);
      });
    }
  }
}

TEST(Compressed, SumIsSizeTimesMean) {
  Config c = compressed_config();
  c.compress_ratio = 1.0;
  run_runtimes(4, c, [&](Runtime& rt, int rank) {
    AllreduceOptions sum;
    sum.op = ReduceOp::kSum;
    auto out = step(rt, rank, 0, DType::kFloat32, sum);
    for (size_t i = 0; i < out[0].size(); ++i) {
      ASSERT_NEAR(out[0][i], expected_value(4, 0, i, ReduceOp::kSum), 1e-4);
    }
  });
}

TEST(Compressed, WarmupStepsAreDense) {
  Config c = compressed_config();
  c.warmup_steps = 2;
  run_runtimes(2, c, [&](Runtime& rt, int rank) {
    // Steps 0-1 warm-up, step 2 the error feedback's warm start (dense), step 3 compressed.
    for (int s = 0; s < 4; ++s) step(rt, rank, s);
    const Stats stats = rt.stats();
    const CompressorStats& st = stats.compressors.at("arctopk");
    EXPECT_EQ(st.warmup_tensors, 6u);
    EXPECT_EQ(st.tensors, 12u);
    EXPECT_EQ(st.dense_fallbacks, 1u);  // the 1-D tensor in step 3
    EXPECT_GT(st.sketch_bytes, 0u);
    EXPECT_GT(st.selected_rows, 0u);
  });
}

TEST(Compressed, SaveLoadResumesBitForBit) {
  const int world = 3;
  const std::string dir = ::testing::TempDir();
  auto path = [&](int rank) { return dir + "/arc_state_" + std::to_string(rank) + ".bin"; };
  std::vector<std::vector<std::vector<double>>> uninterrupted(world), resumed(world);
  run_runtimes(world, compressed_config(), [&](Runtime& rt, int rank) {
    for (int s = 0; s < 3; ++s) step(rt, rank, s);
    rt.save_state(path(rank));
    for (int s = 3; s < 6; ++s) uninterrupted[rank] = step(rt, rank, s);
  });
  run_runtimes(world, compressed_config(), [&](Runtime& rt, int rank) {
    rt.load_state(path(rank));
    for (int s = 3; s < 6; ++s) resumed[rank] = step(rt, rank, s);
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(resumed[r], uninterrupted[r]) << "rank " << r;

  // Wrong rank, corrupted file, another tensor set.
  run_runtimes(world, compressed_config(), [&](Runtime& rt, int rank) {
    try {
      rt.load_state(path((rank + 1) % world));
      ADD_FAILURE() << "loaded another rank's file";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("saved by rank"));
    }
  });
  run_runtimes(1, compressed_config(), [&](Runtime& rt, int) {
    try {
      rt.load_state(path(0));
      ADD_FAILURE() << "loaded a file of another world size";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("saved by rank 0 of 3, loaded by rank 0 of 1"));
    }
  });
  {
    std::fstream f(path(0), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put('\x7f');
  }
  run_runtimes(1, compressed_config(), [&](Runtime& rt, int) {
    try {
      rt.load_state(path(0));
      ADD_FAILURE() << "loaded a corrupted file";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("corrupted"));
    }
    try {
      rt.load_state(dir + "/does_not_exist.bin");
      ADD_FAILURE();
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("cannot open"));
    }
  });
}

TEST(Compressed, AnotherTensorSetIsRejectedAtFirstUse) {
  const std::string file = ::testing::TempDir() + "/arc_state_set.bin";
  run_runtimes(1, compressed_config(), [&](Runtime& rt, int rank) {
    step(rt, rank, 0);
    rt.save_state(file);
  });
  run_runtimes(1, compressed_config(), [&](Runtime& rt, int) {
    rt.load_state(file);
    std::vector<float> other(64, 1.0f);
    Status s = rt.synchronize(
        rt.allreduce_async("other", Tensor{other.data(), DType::kFloat32, {8, 8}}, {}));
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), HasSubstr("'other'"));
    EXPECT_THAT(s.message(), HasSubstr("another set of tensors"));
  });
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce

namespace arcreduce {
namespace testing {
namespace {

// fp32 tensors under error feedback are reduced in their own memory: rows a compressor did not
// select must come back as zeros (not as this rank's input), identically on every rank.
TEST(Compressed, InPlaceOutputsAreCompleteAndIdentical) {
  for (const char* ef : {"ef14", "ef21", "ef21m"}) {
    Config c = compressed_config();
    c.error_feedback = ef;
    std::vector<std::vector<std::vector<double>>> out(3);
    run_runtimes(3, c, [&](Runtime& rt, int rank) {
      for (int s = 0; s < 3; ++s) out[rank] = step(rt, rank, s);
    });
    for (int r = 1; r < 3; ++r) EXPECT_EQ(out[r], out[0]) << ef << " rank " << r;
    if (std::string(ef) == "ef14") {
      // ef14's output is the compressor's mean: only k = 8 of 32 rows of "t0" are non-zero.
      int nonzero_rows = 0;
      for (int row = 0; row < 32; ++row) {
        bool any = false;
        for (int col = 0; col < 8; ++col) any |= out[0][0][row * 8 + col] != 0.0;
        nonzero_rows += any;
      }
      EXPECT_EQ(nonzero_rows, 8);
    }
  }
}

// Without error feedback ARC-Top-K reduces fp32 tensors in their own memory
// (Compressor::reduces_in_place); fp64 tensors go through fp32 working copies. Both must give
// every selected row the exact mean over ranks and zeros elsewhere, and the same rows.
TEST(Compressed, NoErrorFeedbackInPlaceMatchesWorkingCopies) {
  Config c = compressed_config();
  c.error_feedback = "none";
  const int ranks = 3;
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    std::vector<std::vector<std::vector<double>>> out(ranks);
    run_runtimes(ranks, c, [&](Runtime& rt, int rank) { out[rank] = step(rt, rank, 1, dtype); });
    for (int r = 1; r < ranks; ++r) EXPECT_EQ(out[r], out[0]) << "rank " << r;
    // "t0" is 32 x 8 at ratio 0.25: k = 8 rows hold the mean of the float inputs, the rest 0.
    int selected = 0;
    for (int row = 0; row < 32; ++row) {
      bool any = false;
      for (int col = 0; col < 8; ++col) any |= out[0][0][row * 8 + col] != 0.0;
      if (!any) continue;
      ++selected;
      for (int col = 0; col < 8; ++col) {
        const size_t i = static_cast<size_t>(row * 8 + col);
        double mean = 0;
        for (int r = 0; r < ranks; ++r) mean += static_cast<float>(input_value(r, 0 + 3 * 1, i));
        EXPECT_NEAR(out[0][0][i], mean / ranks, 1e-5) << "row " << row << " col " << col;
      }
    }
    EXPECT_EQ(selected, 8) << dtype_name(dtype);
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce

namespace arcreduce {
namespace testing {
namespace {

// ARCREDUCE_BATCH_COMPRESSED: from the second step on, a step's compressed tensors go out in one
// cycle (one negotiation round); a step that leaves a tensor out still completes (released at
// the hold deadline), and the results equal those of the runtime that sends at once.
TEST(Compressed, BatchedStepsGoOutTogetherAndSkippedTensorsDoNotHang) {
  for (bool batched : {true, false}) {
    Config c = compressed_config();
    c.batch_compressed = batched ? CompressedBatching::kOn : CompressedBatching::kOff;
    std::vector<std::vector<std::vector<double>>> outputs(2);
    run_runtimes(2, c, [&](Runtime& rt, int rank) {
      for (int s = 0; s < 3; ++s) outputs[rank] = step(rt, rank, s);
      // A step with only t0 and t2 (t1 skipped), then the full set again.
      std::vector<HostTensor> tensors;
      tensors.emplace_back(DType::kFloat32, std::vector<int64_t>{32, 8});
      tensors.emplace_back(DType::kFloat32, std::vector<int64_t>{4, 6, 2, 2});
      Handle h0 = rt.allreduce_async("t0", tensors[0].view(), {});
      Handle h2 = rt.allreduce_async("t2", tensors[1].view(), {});
      EXPECT_TRUE(rt.synchronize(h0).ok());
      EXPECT_TRUE(rt.synchronize(h2).ok());
      // Negotiation rounds of three full steps whose tensors come 5 ms apart (five cycle
      // times, as backward produces them): held, the step goes out in one cycle (a rank that
      // waits may add an idle one while the other is still submitting); sent at once, each
      // tensor takes a cycle of its own. On a loaded machine a rank descheduled while it submits
      // adds idle rounds, and a late coordinator merges cycles: the fewest held rounds and the
      // most unheld ones are checked.
      uint64_t fewest_rounds = UINT64_MAX, most_rounds = 0;
      for (int s = 4; s < 7; ++s) {
        const uint64_t before = rt.stats().negotiation_collectives;
        outputs[rank] = step(rt, rank, s, DType::kFloat32, {}, std::chrono::milliseconds(5));
        const uint64_t rounds = rt.stats().negotiation_collectives - before;
        fewest_rounds = std::min(fewest_rounds, rounds);
        most_rounds = std::max(most_rounds, rounds);
      }
      if (batched) {
        EXPECT_LE(fewest_rounds, 2u) << "rank " << rank;
      } else {
        EXPECT_GE(most_rounds, 3u) << "rank " << rank;
      }
    });
    EXPECT_EQ(outputs[0], outputs[1]);
  }
}

// A held step's awaited tensors do not wake the coordinator (TensorQueue::set_silent), so a step
// that skips one, on a rank whose user only polls (no synchronize() to release what is held),
// completes by the hold deadline alone; the next full step is held and correct again.
TEST(Compressed, HeldStepWithASkippedTensorCompletesWithoutSynchronize) {
  Config c = compressed_config();
  c.batch_compressed = CompressedBatching::kOn;
  std::vector<std::vector<std::vector<double>>> outputs(2);
  run_runtimes(2, c, [&](Runtime& rt, int rank) {
    for (int s = 0; s < 3; ++s)
      step(rt, rank, s, DType::kFloat32, {}, std::chrono::milliseconds(2));
    std::vector<HostTensor> tensors;
    tensors.emplace_back(DType::kFloat32, std::vector<int64_t>{32, 8});
    tensors.emplace_back(DType::kFloat32, std::vector<int64_t>{4, 6, 2, 2});
    const Handle h0 = rt.allreduce_async("t0", tensors[0].view(), {});
    const Handle h2 = rt.allreduce_async("t2", tensors[1].view(), {});
    const auto start = Clock::now();
    while (!(rt.poll(h0) && rt.poll(h2)) && Clock::now() - start < std::chrono::seconds(60)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_TRUE(rt.poll(h0) && rt.poll(h2)) << "rank " << rank << ": held past the deadline";
    EXPECT_TRUE(rt.synchronize(h0).ok());
    EXPECT_TRUE(rt.synchronize(h2).ok());
    for (int s = 4; s < 6; ++s) outputs[rank] = step(rt, rank, s);
    EXPECT_GE(rt.stats().held_steps, 4u) << "rank " << rank;
  });
  EXPECT_EQ(outputs[0], outputs[1]);
}

// ARCREDUCE_BATCH_COMPRESSED=auto over the negotiation: every rank's trial alternates blocks of
// held and sent steps on the same steps; once all are over, the ranks average their medians and all
// hold, or all do not. One rank slowing one mode's steps (sleeping before it submits them) slows
// them for every rank, as the others wait for it; the trial sees that mode as slower.
TEST(Compressed, AutoBatchingHoldsOnEveryRankOrNoneAsTheTrialMeasured) {
  const int unmeasured = StepBatcher::kUnmeasuredSteps;
  const int trial_steps = StepBatcher::kTrialSteps;
  const int after = 5;  // steps after the one in which the trial ends
  const int steps = unmeasured + trial_steps + 1 + after;
  for (bool holding_slowed : {false, true}) {
    Config c = compressed_config();
    c.batch_compressed = CompressedBatching::kAuto;
    std::vector<uint64_t> held(3);
    std::vector<std::vector<std::vector<double>>> outputs(3);
    run_runtimes(3, c, [&](Runtime& rt, int rank) {
      for (int s = 0; s < steps; ++s) {
        const int trial_step = s - unmeasured;
        if (trial_step >= 0 && trial_step < trial_steps) {
          // Rank 2 alone slows the held steps, or all ranks slow the sent ones.
          const bool held_step = StepBatcher::trial_step_holds(trial_step);
          const bool slow = holding_slowed ? held_step && rank == 2 : !held_step;
          if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(40));
        }
        outputs[rank] = step(rt, rank, s);
      }
      held[rank] = rt.stats().held_steps;
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(outputs[r], outputs[0]) << "rank " << r;
      // The trial's held steps, then every step after the trial's end if holding was faster.
      const uint64_t expected = trial_steps / 2 + (holding_slowed ? 0 : after);
      EXPECT_EQ(held[r], expected) << "rank " << r << (holding_slowed ? ", holding slowed" : "");
    }
  }
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
