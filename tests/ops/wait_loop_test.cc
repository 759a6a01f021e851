// run_wait_loop (ops/mpi_wait.h) driven by scripted completions on a clock of the test's own: the
// kSleep back-off doubles while nothing completes and starts again from min_sleep after any
// completion, whether the first test of a round saw it or the burst after a sleep.
#include <chrono>
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
      if (done < completions.size() && polls >= completions[done]) {
        ++done;
        *progressed = true;
      }
      return done == completions.size();
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

}  // namespace
}  // namespace arcreduce
