// run_wait_loop (ops/mpi_wait.h) driven by scripted completions on a clock of the test's own: the
// kSleep back-off doubles while nothing completes and starts again from min_sleep after any
// completion, whether the first test of a round saw it or the burst after a sleep; a wait whose
// least length is known sleeps a sixteenth of it at a time.
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "ops/mpi_wait.h"

namespace arcreduce {
namespace {

using std::chrono::microseconds;

// Requests that complete one at a time at the poll numbers given; every poll costs 1 us.
struct ScriptedWait {
  std::vector<int> completions;  // poll numbers (1-based) at which one request completes
  // Or, where set, the clock readings from which the next request completes at a poll.
  std::vector<microseconds> completion_times;
  int polls = 0;
  size_t done = 0;
  WaitLoopHooks::TimePoint clock{};
  std::vector<microseconds> sleeps;
  std::vector<int> sleep_after_poll;  // the poll count when each sleep began

  WaitLoopHooks hooks() {
    WaitLoopHooks h;
    h.poll = [this](bool* progressed) {
      ++polls;
      clock += microseconds(1);
      const size_t total = completion_times.empty() ? completions.size() : completion_times.size();
      const bool due = completion_times.empty()
                           ? done < completions.size() && polls >= completions[done]
                           : done < completion_times.size() &&
                                 clock - WaitLoopHooks::TimePoint{} >= completion_times[done];
      if (due) {
        ++done;
        *progressed = true;
      }
      return done == total;
    };
    h.now = [this] { return clock; };
    h.sleep = [this](microseconds d) {
      sleeps.push_back(d);
      sleep_after_poll.push_back(polls);
      clock += d;
    };
    h.yield = [] {};
    h.timeout = [] { throw std::runtime_error("timed out"); };
    return h;
  }
};

WaitPolicy sleep_policy() {
  WaitPolicy p;
  p.mode = WaitMode::kSleep;
  p.min_sleep = microseconds(10);
  p.max_sleep = microseconds(2000);
  p.poll_burst = 4;
  return p;
}

// The first sleep that began after poll `poll`.
microseconds first_sleep_after(const ScriptedWait& w, int poll) {
  for (size_t i = 0; i < w.sleeps.size(); ++i) {
    if (w.sleep_after_poll[i] >= poll) return w.sleeps[i];
  }
  ADD_FAILURE() << "no sleep after poll " << poll;
  return microseconds(0);
}

TEST(WaitLoop, BackOffDoublesWhileNothingCompletes) {
  ScriptedWait w;
  w.completions = {1000};
  run_wait_loop(sleep_policy(), microseconds(0), w.hooks());
  ASSERT_GE(w.sleeps.size(), 8u);
  // Bounded by 1/16 of the time waited, then doubling up to max_sleep.
  for (size_t i = 1; i < w.sleeps.size(); ++i) {
    EXPECT_GE(w.sleeps[i], w.sleeps[i - 1]) << "sleep " << i;
  }
  EXPECT_EQ(w.sleeps.back(), microseconds(2000));
}

// Nothing completes for long enough that the back-off has grown, then one request of three
// completes in the burst that follows a sleep: the next sleep is min_sleep again.
TEST(WaitLoop, CompletionInTheBurstAfterASleepRestartsTheBackOff) {
  ScriptedWait w;
  const WaitPolicy policy = sleep_policy();
  // Polls come as 1 (the round's first test) + 4 (the burst) per sleep; the sleeps grow by at
  // most 1/16 of the time waited, so they reach max_sleep within about 90. Completion at the
  // third poll of a burst, after 150 sleeps.
  const int burst_poll = 1 + 150 * 5 + 3;
  w.completions = {burst_poll, burst_poll + 200, burst_poll + 400};
  run_wait_loop(policy, microseconds(0), w.hooks());
  // The sleep before the completion had grown to the maximum...
  microseconds before{0};
  for (size_t i = 0; i < w.sleeps.size(); ++i) {
    if (w.sleep_after_poll[i] < burst_poll) before = w.sleeps[i];
  }
  EXPECT_EQ(before, policy.max_sleep);
  // ...and the first one after it starts over.
  EXPECT_EQ(first_sleep_after(w, burst_poll), policy.min_sleep);
}

TEST(WaitLoop, CompletionInTheFirstTestRestartsTheBackOff) {
  ScriptedWait w;
  const WaitPolicy policy = sleep_policy();
  const int first_test = 1 + 150 * 5;  // the round's first test after 150 sleeps
  w.completions = {first_test, first_test + 300};
  run_wait_loop(policy, microseconds(0), w.hooks());
  EXPECT_EQ(first_sleep_after(w, first_test), policy.min_sleep);
}

TEST(WaitLoop, TimeoutCountsFromTheLastCompletion) {
  ScriptedWait w;
  WaitPolicy policy = sleep_policy();
  policy.timeout = std::chrono::milliseconds(50);
  w.completions = {100, 1000000};  // the second never comes in time
  EXPECT_THROW(run_wait_loop(policy, microseconds(0), w.hooks()), std::runtime_error);
  // It ran past the first completion and gave up about 50 ms later, not 50 ms after the start.
  EXPECT_EQ(w.done, 1u);
  EXPECT_GT(w.clock - WaitLoopHooks::TimePoint{}, std::chrono::milliseconds(50));
}

TEST(WaitLoop, YieldModeNeverSleeps) {
  ScriptedWait w;
  WaitPolicy policy = sleep_policy();
  policy.mode = WaitMode::kYield;
  w.completions = {50, 60};
  run_wait_loop(policy, microseconds(0), w.hooks());
  EXPECT_TRUE(w.sleeps.empty());
  EXPECT_EQ(w.polls, 60);
}

// A wait that cannot end before E (its bytes over the link) sleeps E/16 at a time from its first
// sleep, even above max_sleep, where the back-off bounded by 1/16 of the time waited would wake
// it several times as often: a 1 MiB ring segment at 25 Mbit/s is a 336 ms wait.
TEST(WaitLoop, ExpectedLengthSleepsASixteenthAtATime) {
  const microseconds expected(336000);
  ScriptedWait predicted;
  predicted.completion_times = {expected};
  run_wait_loop(sleep_policy(), microseconds(0), predicted.hooks(), expected);
  ASSERT_FALSE(predicted.sleeps.empty());
  for (microseconds s : predicted.sleeps) EXPECT_EQ(s, expected / 16);
  EXPECT_LE(predicted.sleeps.size(), 17u);
  // Noticed at most one sleep late.
  EXPECT_LE(predicted.clock - WaitLoopHooks::TimePoint{},
            expected + expected / 16 + microseconds(50));

  ScriptedWait unpredicted;
  unpredicted.completion_times = {expected};
  run_wait_loop(sleep_policy(), microseconds(0), unpredicted.hooks());
  EXPECT_GT(unpredicted.sleeps.size(), 3 * predicted.sleeps.size());
}

TEST(WaitLoop, ExpectedSleepsStopAtTheLongest) {
  const microseconds expected(10 * 16 * kLongestExpectedSleep.count());
  ScriptedWait w;
  w.completion_times = {microseconds(2 * kLongestExpectedSleep.count())};
  run_wait_loop(sleep_policy(), microseconds(0), w.hooks(), expected);
  ASSERT_FALSE(w.sleeps.empty());
  EXPECT_EQ(w.sleeps.front(), kLongestExpectedSleep);
}

// The prediction covers the wait as a whole: once one of its requests has completed, the rest is
// polled as a stream again, from min_sleep.
TEST(WaitLoop, ACompletionEndsThePrediction) {
  const microseconds expected(160000);
  ScriptedWait w;
  w.completion_times = {microseconds(100000), microseconds(180000)};
  const WaitPolicy policy = sleep_policy();
  run_wait_loop(policy, microseconds(0), w.hooks(), expected);
  ASSERT_EQ(w.done, 2u);
  EXPECT_EQ(w.sleeps.front(), expected / 16);
  bool back_to_min = false;
  for (microseconds s : w.sleeps) back_to_min = back_to_min || s == policy.min_sleep;
  EXPECT_TRUE(back_to_min);
}

TEST(WaitLoop, ExpectedWaitIsTheBytesOverTheLink) {
  WaitPolicy policy = sleep_policy();
  EXPECT_EQ(expected_wait(1 << 20, policy), microseconds(0));  // nothing known
  policy.seconds_per_byte = 8.0 / 25e6;                        // 25 Mbit/s
  EXPECT_NEAR(static_cast<double>(expected_wait(1000000, policy).count()), 320000.0, 1.0);
  EXPECT_EQ(expected_wait(0, policy), microseconds(0));
  EXPECT_EQ(expected_wait(size_t{1} << 62, policy), 16 * kLongestExpectedSleep);
  policy.seconds_per_byte = -1;
  EXPECT_EQ(expected_wait(1000, policy), microseconds(0));
  policy.seconds_per_byte = std::nan("");
  EXPECT_EQ(expected_wait(1000, policy), microseconds(0));
  policy.seconds_per_byte = 8.0 / 25e6;
  policy.mode = WaitMode::kYield;
  EXPECT_EQ(expected_wait(1000000, policy), microseconds(0));  // only kSleep sleeps
}

}  // namespace
}  // namespace arcreduce
