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

}  // namespace
}  // namespace arcreduce
