// arcreduce::stats() under mpirun: counters move by exactly what the test did (ops completed and
// failed, per-compressor tensors), bytes move when there is a wire, buckets follow the fusion
// setting and cache hits follow the cache setting of the CTest entry's ARCREDUCE_* variables.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/mpi/runtime_test_util.h"

namespace arcreduce_test {
namespace {

using arcreduce::Handle;
using arcreduce::Stats;
using arcreduce::Status;

uint64_t compressor_tensors(const Stats& s, const std::string& name) {
  auto it = s.compressors.find(name);
  return it == s.compressors.end() ? 0 : it->second.tensors;
}

// Submits n fp32 tensors of `count` elements at once and waits for them all.
void reduce_batch(const std::string& prefix, int n, int64_t count, int salt) {
  std::vector<TestTensor> ts;
  std::vector<Handle> hs;
  for (int i = 0; i < n; ++i) ts.emplace_back(DType::kFloat32, std::vector<int64_t>{count});
  for (int i = 0; i < n; ++i) {
    fill_inputs(ts[i], arcreduce::rank(), salt + i);
    hs.push_back(arcreduce::allreduce_async(prefix + std::to_string(i), ts[i].view(),
                                            dense(ReduceOp::kSum)));
  }
  for (int i = 0; i < n; ++i) {
    Status s = arcreduce::synchronize(hs[i]);
    EXPECT_TRUE(s.ok()) << prefix << i << ": " << describe(s);
    EXPECT_EQ(check_reduced(ts[i], ReduceOp::kSum, arcreduce::size(), salt + i), "");
  }
}

TEST(Stats, CountersMatchWhatWasSubmitted) {
  const arcreduce::Config cfg = arcreduce::Config::from_env();
  constexpr int kTensors = 10;
  constexpr int64_t kCount = 1000;
  const Stats before = arcreduce::stats();
  reduce_batch("stats/a", kTensors, kCount, 0);
  const Stats after = arcreduce::stats();

  EXPECT_EQ(after.rank, arcreduce::rank());
  EXPECT_EQ(after.ops_completed - before.ops_completed, static_cast<uint64_t>(kTensors));
  EXPECT_EQ(after.ops_failed, before.ops_failed);
  EXPECT_EQ(compressor_tensors(after, "none") - compressor_tensors(before, "none"),
            static_cast<uint64_t>(kTensors));
  EXPECT_GT(after.cycles, before.cycles);
  const uint64_t buckets = after.buckets - before.buckets;
  EXPECT_GE(buckets, 1u);
  EXPECT_LE(buckets, static_cast<uint64_t>(kTensors));
  if (cfg.fusion_threshold == 0) {
    EXPECT_EQ(buckets, static_cast<uint64_t>(kTensors)) << "fusion is disabled";
  }
  if (arcreduce::size() > 1) {
    EXPECT_GT(after.bytes_sent, before.bytes_sent);
    EXPECT_GT(after.bytes_received, before.bytes_received);
    // Every rank must at least send its share of the payload in any allreduce algorithm.
    const uint64_t payload = kTensors * kCount * sizeof(float);
    EXPECT_GE(after.bytes_sent - before.bytes_sent,
              payload * (arcreduce::size() - 1) / arcreduce::size());
  }
  EXPECT_GE(after.negotiation_seconds, before.negotiation_seconds);
  EXPECT_GE(after.communication_seconds, before.communication_seconds);
  // Every cycle negotiates with one collective at least (more for a full negotiation), and each
  // bucket adds its data collectives when there is a wire.
  const uint64_t negotiation = after.negotiation_collectives - before.negotiation_collectives;
  const uint64_t collectives = after.collectives - before.collectives;
  if (arcreduce::size() > 1) {
    EXPECT_GE(negotiation, after.cycles - before.cycles);
    EXPECT_GE(collectives, negotiation + buckets);
  }
  EXPECT_LE(negotiation, collectives);
  EXPECT_GT(after.coordinator_cpu_seconds, 0);
  EXPECT_GE(after.coordinator_cpu_seconds, before.coordinator_cpu_seconds);
}

// An idle runtime (nothing submitted) joins a cycle every 50 ms and sleeps in between: its
// coordinator's CPU time over 0.5 s of wall time stays far below the wall time. The bound is
// loose (a quarter of a core) so a loaded machine cannot fail it; bench/ reports the figure.
TEST(Stats, IdleCoordinatorLeavesTheCore) {
  const Stats before = arcreduce::stats();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Stats after = arcreduce::stats();
  EXPECT_LT(after.coordinator_cpu_seconds - before.coordinator_cpu_seconds, 0.125);
  EXPECT_GE(after.cycles - before.cycles, 1u) << "idle ranks still join cycles";
}

// The coordinator is named, so that `top -H` and profilers tell its CPU time apart from the
// training thread's: exactly one thread of this process carries the name.
TEST(Stats, CoordinatorThreadIsNamed) {
  int named = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name == "arcreduce-coord") ++named;
  }
  EXPECT_EQ(named, 1);
}

// A rank that blocks on its op while the round that took it still waits for a late rank must
// not start a round of its own afterwards: that round would carry nothing from it, and every
// other rank would spend its next round, and its next step's tensors, on it (two rounds per step
// instead of one). The last rank submits each step's tensor 20 ms after the others, whose
// training threads block in synchronize() 5 ms after their submission, once their coordinator
// has taken the op into its round. Without the rule, 2, 3 and 4 ranks took 24, 30 and 30 rounds
// for the 20 steps; the bound leaves a quarter of a round per step for submissions that straddle
// cycles on a loaded machine.
TEST(Stats, BlockingOnAnOpInFlightAddsNoRound) {
  if (arcreduce::size() < 2) GTEST_SKIP() << "needs a rank to wait for";
  constexpr int kSteps = 20;
  const Stats before = arcreduce::stats();
  for (int step = 0; step < kSteps; ++step) {
    if (arcreduce::rank() == arcreduce::size() - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    TestTensor t(DType::kFloat32, std::vector<int64_t>{4});
    fill_inputs(t, arcreduce::rank(), step);
    const Handle h = arcreduce::allreduce_async("stats/late", t.view(), dense(ReduceOp::kSum));
    // Block only once the coordinator has taken the op into its round.
    if (arcreduce::rank() != arcreduce::size() - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Status s = arcreduce::synchronize(h);
    EXPECT_TRUE(s.ok()) << describe(s);  // no early return: the other ranks go on submitting
    EXPECT_EQ(check_reduced(t, ReduceOp::kSum, arcreduce::size(), step), "");
  }
  const Stats after = arcreduce::stats();
  EXPECT_LE(after.cycles - before.cycles, static_cast<uint64_t>(kSteps + kSteps / 4))
      << "rounds for " << kSteps << " steps of one tensor each";
}

TEST(Stats, FailedOpsAreCounted) {
  const Stats before = arcreduce::stats();
  std::vector<float> buf(4, 1.0f);
  // Two local failures: an invalid tensor and a bad option.
  Status s1 =
      arcreduce::allreduce("stats/invalid", view_of(nullptr, DType::kFloat32, {4}), dense());
  arcreduce::AllreduceOptions bad = dense();
  bad.compression.compressor = "bogus";
  Status s2 = arcreduce::allreduce("stats/badopt", view_of(buf.data(), DType::kFloat32, {4}), bad);
  EXPECT_FALSE(s1.ok());
  EXPECT_FALSE(s2.ok());
  reduce_batch("stats/b", 2, 10, 3);
  const Stats after = arcreduce::stats();
  EXPECT_EQ(after.ops_failed - before.ops_failed, 2u) << "every op ending in an error counts";
  EXPECT_EQ(after.ops_completed - before.ops_completed, 2u);
}

// Steady state: the same names every step go through the response cache when it is enabled,
// never when ARCREDUCE_CACHE_CAPACITY=0.
TEST(Stats, ResponseCacheFollowsConfig) {
  const arcreduce::Config cfg = arcreduce::Config::from_env();
  constexpr int kTensors = 8;
  constexpr int kSteps = 6;
  const Stats before = arcreduce::stats();
  for (int step = 0; step < kSteps; ++step) reduce_batch("stats/cache", kTensors, 32, step);
  const Stats after = arcreduce::stats();
  EXPECT_EQ(after.ops_completed - before.ops_completed, static_cast<uint64_t>(kTensors * kSteps));
  const uint64_t hits = after.cache_hits - before.cache_hits;
  if (cfg.cache_capacity == 0) {
    EXPECT_EQ(hits, 0u) << "the cache is disabled";
  } else if (cfg.cache_capacity >= kTensors) {
    // The first step negotiates in full; later steps can hit. Allow a step of slack for
    // submissions that straddle cycles.
    EXPECT_GE(hits, static_cast<uint64_t>(kTensors * (kSteps - 2)))
        << "steady-state steps should be served by the response cache";
  }
  EXPECT_GT(after.full_negotiations, before.full_negotiations);
}

}  // namespace
}  // namespace arcreduce_test
