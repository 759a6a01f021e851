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
  StepBatcher b(true);
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

// A tensor the step skips costs at most the hold limit (twice the previous step's submission
// span plus kSlack), never a hang; the next step expects the smaller set.
TEST(StepBatcher, ReleasesAtTheDeadlineWhenATensorIsSkipped) {
  StepBatcher b(true);
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
  StepBatcher b(true);
  Clock::time_point t = Clock::now();
  b.admit({request("a"), request("b")}, t);
  EXPECT_EQ(names(b.admit({request("a")}, t + milliseconds(1))), Names{});
  EXPECT_EQ(names(b.release_all()), (Names{"a"}));
  EXPECT_FALSE(b.holding());

  StepBatcher off(false);
  off.admit({request("a"), request("b")}, t);
  EXPECT_EQ(names(off.admit({request("a")}, t + milliseconds(1))), (Names{"a"}));
  EXPECT_FALSE(off.holding());
}

}  // namespace
}  // namespace arcreduce
