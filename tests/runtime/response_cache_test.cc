#include <gtest/gtest.h>

#include "runtime/response_cache.h"

namespace arcreduce {
namespace {

TensorSignature sig(int64_t n) {
  TensorSignature s;
  s.shape = {n};
  return s;
}

TEST(ResponseCache, PutFindErase) {
  ResponseCache c(4);
  std::string evicted;
  c.put("a", sig(1), &evicted);
  c.put("b", sig(2), &evicted);
  EXPECT_EQ(c.find("a"), 0);
  EXPECT_EQ(c.find("b"), 1);
  EXPECT_EQ(c.find("z"), -1);
  EXPECT_EQ(c.signature(1), sig(2));
  c.erase(0);
  EXPECT_EQ(c.find("a"), -1);
  c.put("c", sig(3), &evicted);
  EXPECT_EQ(c.find("c"), 0);  // lowest free slot is reused
  EXPECT_TRUE(evicted.empty());
}

TEST(ResponseCache, EvictsLeastRecentlyUsed) {
  ResponseCache c(2);
  std::string evicted;
  c.put("a", sig(1), &evicted);
  c.put("b", sig(1), &evicted);
  c.put("a", sig(5), &evicted);  // refresh: b is now the oldest
  EXPECT_TRUE(evicted.empty());
  EXPECT_EQ(c.signature(c.find("a")), sig(5));
  c.put("c", sig(1), &evicted);
  EXPECT_EQ(evicted, "b");
  EXPECT_EQ(c.find("b"), -1);
  EXPECT_EQ(c.find("c"), 1);
}

TEST(ResponseCache, ZeroCapacityCachesNothing) {
  ResponseCache c(0);
  std::string evicted;
  c.put("a", sig(1), &evicted);
  EXPECT_EQ(c.find("a"), -1);
  EXPECT_EQ(c.capacity(), 0u);
}

// Two caches fed the same operations stay identical (the invariant negotiation relies on).
TEST(ResponseCache, SameOperationsSameSlots) {
  ResponseCache x(8), y(8);
  std::string ex, ey;
  for (int i = 0; i < 200; ++i) {
    std::string name = "t" + std::to_string((i * 7) % 13);
    x.put(name, sig(i), &ex);
    y.put(name, sig(i), &ey);
    EXPECT_EQ(ex, ey);
    if (i % 5 == 0) {
      x.erase(static_cast<size_t>(i % 8));
      y.erase(static_cast<size_t>(i % 8));
    }
  }
  for (int i = 0; i < 13; ++i) {
    std::string name = "t" + std::to_string(i);
    EXPECT_EQ(x.find(name), y.find(name));
  }
}

}  // namespace
}  // namespace arcreduce
