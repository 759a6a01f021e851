#include "runtime/admission.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "ops/loopback_communicator.h"
#include "runtime/batching_trial.h"

namespace arcreduce {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Names = std::vector<std::string>;
using Silent = std::unordered_set<std::string>;

// A float32 all-reduce of `elements` entries through `compressor`.
Request request(const std::string& name, const std::string& compressor, int64_t elements = 16) {
  Request r;
  r.name = name;
  r.signature.shape = {elements};
  r.signature.compression.compressor = compressor;
  return r;
}

Request refusal(const std::string& name) {
  Request r = request(name, "none");
  r.refusal = "bad input on this rank";
  return r;
}

Names names(const std::vector<Request>& requests) {
  Names out;
  for (const Request& r : requests) out.push_back(r.name);
  return out;
}

// Holds compressed tensors from the second step and dense ones below 1,000 bytes.
Admission holding_both() {
  return Admission(CompressedBatching::kOn, 0, 1000);
}

// The first step learns the step's names (compressed c1, c2; small dense d1, large dense d2) and
// holds nothing.
void learn_step(Admission& a, Clock::time_point t) {
  Admission::Admitted first =
      a.admit({request("c2", "arctopk"), request("d1", "none", 2)}, t, false);
  EXPECT_EQ(names(first.requests), (Names{"c2", "d1"}));
  first =
      a.admit({request("c1", "arctopk"), request("d2", "none", 500)}, t + milliseconds(1), false);
  EXPECT_EQ(names(first.requests), (Names{"c1", "d2"}));
  EXPECT_FALSE(a.holding());
  a.completed(t + milliseconds(2));
}

// Both holds at once: the compressed tensor waits for the step's last compressed one, the small
// dense one for the large one, and a refusal goes out at once, after what passes.
TEST(Admission, BothHoldsAndRefusalsInOneCycle) {
  Admission a = holding_both();
  const Clock::time_point t = Clock::now();
  learn_step(a, t);
  const Clock::time_point s = t + milliseconds(10);
  Admission::Admitted got =
      a.admit({request("c2", "arctopk"), request("d1", "none", 2), refusal("bad")}, s, false);
  EXPECT_EQ(names(got.requests), Names{"bad"});
  EXPECT_TRUE(a.holding());
  got = a.admit({request("c1", "arctopk"), request("d2", "none", 500)}, s + milliseconds(1), false);
  EXPECT_EQ(names(got.requests), (Names{"c2", "c1", "d1", "d2"}));
  EXPECT_FALSE(a.holding());
}

// A user blocked on an op, or shutdown: everything held goes out in this cycle, after the
// cycle's own requests and refusals.
TEST(Admission, ReleaseFreesBothHolds) {
  Admission a = holding_both();
  const Clock::time_point t = Clock::now();
  learn_step(a, t);
  const Clock::time_point s = t + milliseconds(10);
  a.admit({request("c2", "arctopk"), request("d1", "none", 2)}, s, false);
  ASSERT_TRUE(a.holding());
  const Admission::Admitted got = a.admit({refusal("bad")}, s + milliseconds(1), true);
  EXPECT_EQ(names(got.requests), (Names{"bad", "c2", "d1"}));
  EXPECT_FALSE(a.holding());
  ASSERT_TRUE(got.silent.has_value());
  EXPECT_TRUE(got.silent->empty());
}

// While a step is held, its awaited names need not wake the coordinator; the set is given out
// while holding and cleared once, when the hold ends.
TEST(Admission, SilentNamesFollowTheHeldStep) {
  Admission a = holding_both();
  const Clock::time_point t = Clock::now();
  learn_step(a, t);
  const Clock::time_point s = t + milliseconds(10);
  Admission::Admitted got = a.admit({request("c2", "arctopk")}, s, false);
  ASSERT_TRUE(got.silent.has_value());
  EXPECT_EQ(*got.silent, (Silent{"c1"}));
  got = a.admit({request("c1", "arctopk")}, s + milliseconds(1), false);
  ASSERT_TRUE(got.silent.has_value());
  EXPECT_TRUE(got.silent->empty());
  got = a.admit({}, s + milliseconds(2), false);
  EXPECT_FALSE(got.silent.has_value()) << "no change, nothing to tell the queue";
}

// Dense tensors held by the grouper alone do not silence anything: they are released by bytes.
TEST(Admission, DenseHoldSilencesNothing) {
  Admission a(CompressedBatching::kOff, 0, 1000);
  const Clock::time_point t = Clock::now();
  learn_step(a, t);
  const Admission::Admitted got = a.admit({request("d1", "none", 2)}, t + milliseconds(10), false);
  EXPECT_TRUE(got.requests.empty());
  EXPECT_TRUE(a.holding());
  EXPECT_FALSE(got.silent.has_value());
}

// wait() ends no later than the earliest deadline of the two holds, never below zero, and is
// left alone while nothing is held.
TEST(Admission, WaitEndsAtTheEarliestDeadline) {
  Admission a = holding_both();
  const Clock::time_point t = Clock::now();
  EXPECT_EQ(a.wait(microseconds(50000), t), microseconds(50000));
  learn_step(a, t);
  const Clock::time_point s = t + milliseconds(10);
  a.admit({request("c2", "arctopk"), request("d1", "none", 2)}, s, false);
  ASSERT_TRUE(a.holding());
  const microseconds bounded = a.wait(microseconds(10'000'000), s);
  EXPECT_GT(bounded, microseconds(0));
  EXPECT_LT(bounded, microseconds(10'000'000));
  EXPECT_EQ(a.wait(microseconds(10), s), microseconds(10)) << "a shorter wait stays";
  EXPECT_EQ(a.wait(microseconds(10'000'000), s + std::chrono::hours(1)), microseconds(0));
  // Past the deadline the holds let go at the next admit.
  const Admission::Admitted got = a.admit({}, s + bounded + microseconds(1), false);
  EXPECT_FALSE(names(got.requests).empty());
}

// round_wanted(): every combination of its inputs, with and without a hold.
TEST(Admission, RoundWantedTruthTable) {
  Admission idle = holding_both();
  Admission held = holding_both();
  const Clock::time_point t = Clock::now();
  learn_step(held, t);
  held.admit({request("c2", "arctopk")}, t + milliseconds(10), false);
  ASSERT_TRUE(held.holding());
  ASSERT_FALSE(idle.holding());
  for (int bits = 0; bits < 16; ++bits) {
    Admission::RoundInputs in;
    in.requests = bits & 1;
    in.work_in_flight = bits & 2;
    in.shutdown = bits & 4;
    const bool long_idle = bits & 8;
    in.since_last_round =
        long_idle ? Admission::kIdleCycle : Admission::kIdleCycle - milliseconds(1);
    const bool something = in.requests || in.work_in_flight || in.shutdown;
    EXPECT_EQ(idle.round_wanted(in), something || long_idle) << "bits " << bits;
    EXPECT_EQ(held.round_wanted(in), something) << "bits " << bits << " (holding)";
  }
}

// Refusals are never held, even in a cycle of nothing else while both holds are on.
TEST(Admission, RefusalsAreNeverHeld) {
  Admission a = holding_both();
  const Clock::time_point t = Clock::now();
  learn_step(a, t);
  a.admit({request("c2", "arctopk"), request("d1", "none", 2)}, t + milliseconds(10), false);
  const Admission::Admitted got =
      a.admit({refusal("x"), refusal("y")}, t + milliseconds(11), false);
  EXPECT_EQ(names(got.requests), (Names{"x", "y"}));
  EXPECT_TRUE(a.holding());
}

// Runs StepBatcher's auto trial to its end with the given step times (ms).
void finish_trial(StepBatcher& b, double held_ms, double sent_ms) {
  Clock::time_point t = Clock::now();
  for (int step = 0; !b.trial().done; ++step) {
    ASSERT_LT(step, 100) << "the trial never ends";
    const bool held = b.admit({request("w2", "arctopk")}, t).empty();
    b.admit({request("w1", "arctopk")}, t + milliseconds(1));
    t += microseconds(static_cast<int64_t>((held ? held_ms : sent_ms) * 1000));
    b.completed(t);
  }
}

// Every rank takes the decision of the averaged medians, not its own: rank 0 alone would hold
// (held 10 ms, sent 12 ms), rank 1 alone would not (held 14 ms, sent 10 ms); averaged, sending
// as produced (11 ms) is more than the margin faster than holding (12 ms).
TEST(BatchingTrial, EveryRankTakesTheAveragedDecision) {
  LoopbackWorld world(2);
  const double held_ms[2] = {10, 14}, sent_ms[2] = {12, 10};
  bool decided_hold[2] = {true, true};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      StepBatcher batcher(CompressedBatching::kAuto);
      BatchingTrial trial(batcher);
      EXPECT_FALSE(trial.ready());
      finish_trial(batcher, held_ms[r], sent_ms[r]);
      EXPECT_TRUE(trial.ready());
      EXPECT_TRUE(trial.pending());
      std::unique_ptr<Communicator> comm = world.communicator(r);
      trial.decide(*comm, r, 2, make_logger(r, "error"));
      EXPECT_FALSE(trial.pending());
      // The decision takes effect at the next step: does it hold?
      const Clock::time_point t = Clock::now() + std::chrono::hours(1);
      decided_hold[r] = batcher.admit({request("w2", "arctopk")}, t).empty();
    });
  }
  for (std::thread& t : ranks) t.join();
  EXPECT_TRUE(StepBatcher::hold_pays(held_ms[0], sent_ms[0]));
  EXPECT_FALSE(StepBatcher::hold_pays(held_ms[1], sent_ms[1]));
  EXPECT_FALSE(decided_hold[0]);
  EXPECT_FALSE(decided_hold[1]);
}

}  // namespace
}  // namespace arcreduce
