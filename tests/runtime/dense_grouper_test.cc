#include "runtime/dense_grouper.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace arcreduce {
namespace {

using std::chrono::milliseconds;
using Names = std::vector<std::string>;

// A float32 tensor of `elements` entries.
Request request(const std::string& name, int64_t elements, const std::string& compressor = "none") {
  Request r;
  r.name = name;
  r.signature.shape = {elements};
  r.signature.compression.compressor = compressor;
  return r;
}

Names names(const std::vector<Request>& requests) {
  Names out;
  for (const Request& r : requests) out.push_back(r.name);
  return out;
}

TEST(DenseGrouper, HoldsOnlyUncompressedAllreduces) {
  EXPECT_TRUE(DenseGrouper::holds(request("a", 4).signature));
  EXPECT_TRUE(DenseGrouper::holds(request("a", 4, "fp16").signature));
  EXPECT_FALSE(DenseGrouper::holds(request("a", 4, "arctopk").signature));
  EXPECT_FALSE(DenseGrouper::holds(request("a", 4, "topk").signature));
  Request b = request("a", 4);
  b.signature.collective = Collective::kBroadcast;
  EXPECT_FALSE(DenseGrouper::holds(b.signature));
}

// Backward's order: a small last layer (bias, weight), then a large layer. From the second step
// on, the small ones wait for the large one and go with it; the step's last small tensor does
// not wait for a next step.
TEST(DenseGrouper, SmallTensorsWaitForTheNextLargeOne) {
  DenseGrouper g(1000);  // bytes
  const Clock::time_point t = Clock::now();
  auto step = [&](int s) {
    const Clock::time_point at = t + milliseconds(100 * s);
    std::vector<Names> out;
    out.push_back(names(g.admit({request("b3", 2)}, at)));
    out.push_back(names(g.admit({request("w3", 20)}, at + milliseconds(1))));
    out.push_back(names(g.admit({request("b2", 10)}, at + milliseconds(2))));
    out.push_back(names(g.admit({request("w2", 500)}, at + milliseconds(3))));  // 2,000 bytes
    out.push_back(names(g.admit({request("b1", 3)}, at + milliseconds(4))));    // the last
    return out;
  };
  // The first step learns the step and holds nothing.
  EXPECT_EQ(step(0), (std::vector<Names>{{"b3"}, {"w3"}, {"b2"}, {"w2"}, {"b1"}}));
  EXPECT_FALSE(g.holding());
  const std::vector<Names> grouped = {{}, {}, {}, {"b3", "w3", "b2", "w2"}, {"b1"}};
  EXPECT_EQ(step(1), grouped);
  EXPECT_FALSE(g.holding());
  EXPECT_EQ(step(2), grouped);
}

// Compressed tensors and broadcasts pass through without joining the held bytes.
TEST(DenseGrouper, PassesCompressedTensorsThrough) {
  DenseGrouper g(1000);
  const Clock::time_point t = Clock::now();
  g.admit({request("d1", 2), request("c", 1000, "arctopk"), request("d2", 300)}, t);
  Request bcast = request("p", 1000);
  bcast.signature.collective = Collective::kBroadcast;
  EXPECT_EQ(names(g.admit({request("d1", 2), request("c", 1000, "arctopk"), bcast},
                          t + milliseconds(10))),
            (Names{"c", "p"}));
  EXPECT_TRUE(g.holding());
  EXPECT_EQ(names(g.admit({request("d2", 300)}, t + milliseconds(11))), (Names{"d1", "d2"}));
}

// A tensor that a step skips costs at most twice the longest submission span of the last steps
// plus kSlack, never a hang.
TEST(DenseGrouper, ReleasesAtTheDeadlineWhenATensorIsSkipped) {
  DenseGrouper g(1000);
  const Clock::time_point t = Clock::now();
  g.admit({request("a", 2)}, t);
  g.admit({request("b", 2)}, t + milliseconds(4));  // span 4 ms: limit 8 + 5 ms
  EXPECT_EQ(names(g.admit({request("a", 2)}, t + milliseconds(10))), Names{});
  ASSERT_TRUE(g.holding());
  EXPECT_EQ(g.deadline(), t + milliseconds(10) + milliseconds(13));
  EXPECT_EQ(names(g.admit({}, t + milliseconds(22))), Names{});
  EXPECT_EQ(names(g.admit({}, t + milliseconds(23))), (Names{"a"}));
  // The step that skipped "b" expects "a" alone.
  EXPECT_EQ(names(g.admit({request("a", 2)}, t + milliseconds(30))), (Names{"a"}));
}

// What a step still holds when the next one begins goes out first: nothing more will join it.
TEST(DenseGrouper, ANewStepReleasesWhatTheLastOneHeld) {
  DenseGrouper g(1000);
  const Clock::time_point t = Clock::now();
  g.admit({request("a", 2), request("b", 2)}, t);
  g.admit({request("c", 2)}, t + milliseconds(100));  // a long span: a late deadline
  EXPECT_EQ(names(g.admit({request("a", 2), request("b", 2)}, t + milliseconds(200))), Names{});
  EXPECT_EQ(names(g.admit({request("a", 2)}, t + milliseconds(201))), (Names{"a", "b"}));
  EXPECT_TRUE(g.holding());  // the new step's "a"
  EXPECT_EQ(names(g.release_all()), (Names{"a"}));
  EXPECT_FALSE(g.holding());
}

TEST(DenseGrouper, ZeroHoldsNothing) {
  DenseGrouper g(0);
  const Clock::time_point t = Clock::now();
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(names(g.admit({request("a", 2), request("b", 2)}, t + milliseconds(10 * s))),
              (Names{"a", "b"}));
    EXPECT_FALSE(g.holding());
  }
}

// Enough held bytes release at once, without waiting for the step's end.
TEST(DenseGrouper, ReleasesWhenTheHeldBytesReachTheMinimum) {
  DenseGrouper g(1000);
  const Clock::time_point t = Clock::now();
  g.admit({request("a", 100), request("b", 100), request("c", 100)}, t);
  EXPECT_EQ(names(g.admit({request("a", 100)}, t + milliseconds(10))), Names{});
  EXPECT_EQ(names(g.admit({request("b", 150)}, t + milliseconds(11))), (Names{"a", "b"}));
  EXPECT_FALSE(g.holding());
  EXPECT_EQ(names(g.admit({request("c", 100)}, t + milliseconds(12))), (Names{"c"}));
}

}  // namespace
}  // namespace arcreduce
