#include "runtime/step_batcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace arcreduce {
namespace {

using std::chrono::milliseconds;

Request request(const std::string& name, const std::string& compressor = "arctopk") {
  Request r;
  r.name = name;
  r.signature.shape = {4, 4};
  r.signature.compression.compressor = compressor;
  return r;
}

Request broadcast(const std::string& name) {
  Request r = request(name, "none");
  r.signature.collective = Collective::kBroadcast;
  return r;
}

std::vector<std::string> names(const std::vector<Request>& requests) {
  std::vector<std::string> out;
  for (const Request& r : requests) out.push_back(r.name);
  return out;
}

using Names = std::vector<std::string>;

TEST(StepBatcher, HoldsCompressedTensorsOnlyOnCompressedAllreduces) {
  EXPECT_TRUE(StepBatcher::holds(request("a").signature));
  EXPECT_TRUE(StepBatcher::holds(request("a", "powersgd").signature));
  EXPECT_FALSE(StepBatcher::holds(request("a", "none").signature));
  EXPECT_FALSE(StepBatcher::holds(request("a", "fp16").signature));
  EXPECT_FALSE(StepBatcher::holds(broadcast("a").signature));
}

// Step 1 passes everything through; from step 2 on, compressed tensors wait for the step's last
// compressed tensor, dense ones never wait.
TEST(StepBatcher, ReleasesTheStepsCompressedTensorsTogether) {
  StepBatcher b(CompressedBatching::kOn);
  Clock::time_point t = Clock::now();
  EXPECT_EQ(names(b.admit({request("w2"), request("b2", "none")}, t)), (Names{"w2", "b2"}));
  EXPECT_EQ(names(b.admit({request("w1")}, t + milliseconds(1))), (Names{"w1"}));
  EXPECT_FALSE(b.holding());

  // Step 2: w2 is held, the dense b2 goes, w1 completes the step and releases both.
  EXPECT_EQ(names(b.admit({request("w2")}, t + milliseconds(10))), Names{});
  EXPECT_TRUE(b.holding());
  EXPECT_EQ(names(b.admit({request("b2", "none")}, t + milliseconds(10))), (Names{"b2"}));
  EXPECT_TRUE(b.holding());
  EXPECT_EQ(names(b.admit({request("w1")}, t + milliseconds(11))), (Names{"w2", "w1"}));
  EXPECT_FALSE(b.holding());

  // Step 3, both in one call: released in the same call.
  EXPECT_EQ(names(b.admit({request("w2"), request("w1")}, t + milliseconds(20))),
            (Names{"w2", "w1"}));
}

// A tensor the step skips costs at most the hold limit (twice the longest submission span of
// the last steps plus kSlack), never a hang; the next step expects the smaller set.
TEST(StepBatcher, ReleasesAtTheDeadlineWhenATensorIsSkipped) {
  StepBatcher b(CompressedBatching::kOn);
  Clock::time_point t = Clock::now();
  b.admit({request("a")}, t);
  b.admit({request("b")}, t + milliseconds(4));  // step span 4 ms: limit 8 + 5 ms
  EXPECT_EQ(names(b.admit({request("a")}, t + milliseconds(10))), Names{});
  ASSERT_TRUE(b.holding());
  EXPECT_EQ(b.deadline(), t + milliseconds(10) + milliseconds(13));
  EXPECT_EQ(names(b.admit({}, t + milliseconds(22))), Names{});
  EXPECT_EQ(names(b.admit({}, t + milliseconds(23))), (Names{"a"}));
  // Step 3 starts when "a" comes again: the step before held only "a", so "a" alone completes it.
  EXPECT_EQ(names(b.admit({request("a")}, t + milliseconds(30))), (Names{"a"}));
}

TEST(StepBatcher, ReleaseAllAndDisabled) {
  StepBatcher b(CompressedBatching::kOn);
  Clock::time_point t = Clock::now();
  b.admit({request("a"), request("b")}, t);
  EXPECT_EQ(names(b.admit({request("a")}, t + milliseconds(1))), Names{});
  EXPECT_TRUE(b.holding());
  EXPECT_EQ(names(b.release_all()), (Names{"a"}));
  EXPECT_FALSE(b.holding());

  StepBatcher off(CompressedBatching::kOff);
  off.admit({request("a"), request("b")}, t);
  EXPECT_EQ(names(off.admit({request("a")}, t + milliseconds(1))), (Names{"a"}));
  EXPECT_FALSE(off.holding());
}

// One step of two compressed layers, w2 then w1 1 ms later, from `start`; returns whether w2 was
// held (it then comes out with w1).
bool run_step(StepBatcher& b, Clock::time_point start) {
  const bool held = b.admit({request("w2")}, start).empty();
  const Names second = names(b.admit({request("w1")}, start + milliseconds(1)));
  EXPECT_EQ(second, held ? (Names{"w2", "w1"}) : (Names{"w1"}));
  EXPECT_FALSE(b.holding());
  return held;
}

// kAuto: after the unmeasured steps, blocks of held and sent steps alternate until each mode has
// kTrialStepsPerMode step times (last completion to last completion; a block's first step is not
// timed); nothing holds after the trial until the coordinator sets the ranks' decision, which
// then holds from the next step.
void check_trial(double held_ms, double sent_ms) {
  StepBatcher b(CompressedBatching::kAuto);
  Clock::time_point t = Clock::now();
  std::vector<bool> modes;
  while (!b.trial().done) {
    ASSERT_LT(modes.size(), 100u) << "the trial never ends";
    const bool held = run_step(b, t);
    modes.push_back(held);
    // The step's last op completes: its time runs from the previous step's last completion.
    t += std::chrono::microseconds(static_cast<int64_t>((held ? held_ms : sent_ms) * 1000));
    b.completed(t);
    b.admit({}, t);  // an idle cycle changes nothing
  }
  // The trial's last step ends when the next one begins: `modes` has that one too.
  const size_t unmeasured = StepBatcher::kUnmeasuredSteps;
  const size_t trial = StepBatcher::kTrialSteps;
  ASSERT_EQ(modes.size(), unmeasured + trial + 1);
  for (size_t i = 0; i < unmeasured; ++i) EXPECT_FALSE(modes[i]) << "step " << i;
  size_t held_in_trial = 0;
  for (size_t i = 0; i < trial; ++i) {
    const bool expected = (i / StepBatcher::kTrialBlockSteps) % 2 == 0;  // held block first
    EXPECT_EQ(modes[unmeasured + i], expected) << i;
    EXPECT_EQ(StepBatcher::trial_step_holds(static_cast<int>(i)), expected) << i;
    held_in_trial += expected;
  }
  EXPECT_DOUBLE_EQ(b.trial().held_median_ms, held_ms);
  EXPECT_DOUBLE_EQ(b.trial().sent_median_ms, sent_ms);
  // The step that began as the trial ended chose before the ranks decided.
  EXPECT_FALSE(modes.back());
  EXPECT_EQ(b.held_steps(), static_cast<uint64_t>(held_in_trial));
  const bool decision = StepBatcher::hold_pays(held_ms, sent_ms);
  b.set_agreed(decision);
  EXPECT_EQ(run_step(b, t), decision);
  b.set_agreed(false);
  EXPECT_FALSE(run_step(b, t += milliseconds(30)));
  b.set_agreed(true);
  EXPECT_TRUE(run_step(b, t += milliseconds(30)));
}

// A step right after a switch between the modes carries the other mode's after-effects (here
// 100 ms more): the trial does not time the first step of a block, so the medians do not see
// them. Had the modes alternated step by step, every step would have paid it.
TEST(StepBatcher, AutoDoesNotTimeTheStepAfterASwitch) {
  StepBatcher b(CompressedBatching::kAuto);
  Clock::time_point t = Clock::now();
  bool previous = false;
  for (int s = 0; !b.trial().done; ++s) {
    ASSERT_LT(s, 100) << "the trial never ends";
    const bool held = run_step(b, t);
    t += milliseconds((held ? 10 : 20) + (s > 0 && held != previous ? 100 : 0));
    b.completed(t);
    previous = held;
  }
  EXPECT_DOUBLE_EQ(b.trial().held_median_ms, 10.0);
  EXPECT_DOUBLE_EQ(b.trial().sent_median_ms, 20.0);
}

// Steps of the dense warm-up (ARCREDUCE_WARMUP_STEPS) would time dense exchanges: the trial
// starts after them.
TEST(StepBatcher, AutoTrialStartsAfterTheDenseWarmup) {
  StepBatcher b(CompressedBatching::kAuto, 5);
  Clock::time_point t = Clock::now();
  std::vector<bool> modes;
  for (int s = 0; s < 10; ++s) {
    modes.push_back(run_step(b, t));
    t += milliseconds(10);
    b.completed(t);
  }
  const size_t first_trial = 5 + StepBatcher::kUnmeasuredSteps;
  for (size_t i = 0; i < modes.size(); ++i) {
    EXPECT_EQ(modes[i],
              i >= first_trial && StepBatcher::trial_step_holds(static_cast<int>(i - first_trial)))
        << "step " << i;
  }
}

// Holding takes fewer rounds: sending as produced must win by more than the margin.
TEST(StepBatcher, SendingAsProducedMustWinBeyondTheMargin) {
  EXPECT_TRUE(StepBatcher::hold_pays(10.0, 20.0));
  EXPECT_TRUE(StepBatcher::hold_pays(100.0, 100.0));
  EXPECT_TRUE(StepBatcher::hold_pays(100.0, 98.0));
  EXPECT_TRUE(StepBatcher::hold_pays(100.0, 97.5));
  EXPECT_FALSE(StepBatcher::hold_pays(100.0, 96.0));
  EXPECT_FALSE(StepBatcher::hold_pays(20.0, 10.0));
}

TEST(StepBatcher, AutoHoldsWhenHeldStepsWereFaster) {
  check_trial(10.0, 20.0);
}

TEST(StepBatcher, AutoSendsAsProducedWhenHeldStepsWereSlower) {
  check_trial(20.0, 10.0);
}

// A step in which nothing completed has no time of its own: it does not count in the trial.
TEST(StepBatcher, AutoCountsOnlyStepsWithCompletions) {
  StepBatcher b(CompressedBatching::kAuto);
  Clock::time_point t = Clock::now();
  std::vector<bool> modes;
  for (int s = 0; s < 60 && !b.trial().done; ++s) {
    modes.push_back(run_step(b, t));
    t += milliseconds(10);
    if (s % 3 != 0) b.completed(t);  // every third step completes nothing
  }
  ASSERT_TRUE(b.trial().done);
  // Each mode needs its samples: the steps without completions were trial steps that repeat.
  EXPECT_GT(modes.size(),
            static_cast<size_t>(StepBatcher::kUnmeasuredSteps + StepBatcher::kTrialSteps));
}

// Steps with nothing compressed cannot tell the modes apart: no trial, no vote, nothing held.
TEST(StepBatcher, AutoRunsNoTrialWithoutCompressedTensors) {
  StepBatcher b(CompressedBatching::kAuto);
  Clock::time_point t = Clock::now();
  for (int s = 0; s < 40; ++s) {
    EXPECT_EQ(names(b.admit({request("w", "none"), broadcast("p")}, t)), (Names{"w", "p"}));
    t += milliseconds(10);
  }
  EXPECT_FALSE(b.trial().done);
  EXPECT_EQ(b.held_steps(), 0u);
}

// kOn holds from the second step on and counts those steps; kOff never holds.
TEST(StepBatcher, OnCountsHeldStepsOffHoldsNone) {
  StepBatcher on(CompressedBatching::kOn);
  StepBatcher off(CompressedBatching::kOff);
  Clock::time_point t = Clock::now();
  for (int s = 0; s < 5; ++s) {
    EXPECT_EQ(run_step(on, t), s > 0) << s;
    EXPECT_FALSE(run_step(off, t)) << s;
    t += milliseconds(10);
  }
  EXPECT_EQ(on.held_steps(), 4u);
  EXPECT_EQ(off.held_steps(), 0u);
}

}  // namespace
}  // namespace arcreduce
