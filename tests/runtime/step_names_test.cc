#include "runtime/step_names.h"

#include <gtest/gtest.h>

#include <string>
#include <unordered_set>

namespace arcreduce {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using Set = std::unordered_set<std::string>;

TEST(StepNames, ANameSubmittedAgainBeginsAStep) {
  StepNames s(milliseconds(5));
  const Clock::time_point t = Clock::now();
  EXPECT_TRUE(s.add("a", true, t));  // the first submission begins the first step
  EXPECT_FALSE(s.add("b", false, t + milliseconds(1)));
  EXPECT_FALSE(s.add("c", true, t + milliseconds(3)));
  EXPECT_FALSE(s.add("d", false, t + milliseconds(7)));  // not eligible: not in the span
  EXPECT_TRUE(s.expected().empty());
  EXPECT_TRUE(s.complete());  // nothing expected yet

  EXPECT_TRUE(s.add("b", false, t + milliseconds(10)));
  EXPECT_EQ(s.expected(), (Set{"a", "c"}));
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 3000 + 5000));  // span a..c = 3 ms
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.add("a", true, t + milliseconds(11)));
  EXPECT_FALSE(s.complete());
  EXPECT_FALSE(s.add("c", true, t + milliseconds(12)));
  EXPECT_TRUE(s.complete());

  // A step that skips "c" makes the next one expect "a" alone.
  EXPECT_TRUE(s.add("a", true, t + milliseconds(20)));
  EXPECT_EQ(s.expected(), (Set{"a", "c"}));
  EXPECT_TRUE(s.add("a", true, t + milliseconds(30)));
  EXPECT_EQ(s.expected(), Set{"a"});
  EXPECT_TRUE(s.complete());
}

TEST(StepNames, TheLongestSpanOfTheLastStepsBoundsTheHold) {
  StepNames s(milliseconds(5));
  const Clock::time_point t = Clock::now();
  // A step whose gradients come one by one over 20 ms...
  s.add("a", true, t);
  s.add("b", true, t + milliseconds(20));
  // ...then one that submits them all at once (after an evaluation, say).
  s.add("a", true, t + milliseconds(100));
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 20000 + 5000));
  s.add("b", true, t + milliseconds(100));
  // The next step is again held for the long step's span, not the short one's.
  s.add("a", true, t + milliseconds(200));
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 20000 + 5000));
  // The long span leaves the window when kSpanWindow steps have ended after it began to count.
  Clock::time_point at = t + milliseconds(200);
  for (size_t i = 0; i + 2 < StepNames::kSpanWindow; ++i) {
    s.add("b", true, at + milliseconds(1));
    at += milliseconds(10);
    s.add("a", true, at);
    EXPECT_EQ(s.hold_limit(), microseconds(2 * 20000 + 5000)) << i;
  }
  s.add("b", true, at + milliseconds(1));
  s.add("a", true, at + milliseconds(10));
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 1000 + 5000));
}

TEST(StepNames, AStepWithoutEligibleSubmissionsSpansNothing) {
  StepNames s(milliseconds(5));
  const Clock::time_point t = Clock::now();
  s.add("x", false, t);
  s.add("a", true, t + milliseconds(1));
  s.add("x", false, t + milliseconds(50));  // a step of "x" alone: nothing eligible
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 1000 + 5000));
  s.add("x", false, t + milliseconds(60));
  EXPECT_TRUE(s.expected().empty());
  // Not 2 x (1 - 50) ms + 5 ms from the previous step's last eligible submission.
  EXPECT_EQ(s.hold_limit(), microseconds(2 * 1000 + 5000));
}

}  // namespace
}  // namespace arcreduce
