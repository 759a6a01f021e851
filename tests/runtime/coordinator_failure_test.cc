// A failure of one rank's coordinator (an Error thrown on that rank only, inside a collective the
// others are waiting in) ends the job on every rank with that rank's message, within the abort's
// grace period, instead of leaving the others in the collective until a timeout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/runtime/failing_communicator.h"
#include "tests/runtime/loopback_harness.h"

namespace arcreduce {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr char kInjected[] = "injected receive-side failure";

// Rank `victim` of `size` fails in the allreduce of its second op; every rank's second op fails
// with the victim's message, and the world is aborted naming it. The world's own timeout (what
// the others would otherwise wait for) is far longer than the abort's grace period.
void expect_failure_ends_every_rank(int size, int victim, const std::string& compressor) {
  LoopbackWorld world(size, 0, std::chrono::seconds(120));
  auto arm = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::string> second(size);
  std::vector<double> seconds(size, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> comm = world.communicator(r);
      if (r == victim) {
        comm = std::make_unique<FailingCommunicator>(std::move(comm), arm, kInjected);
      }
      Config config = test_config();
      config.compressor = compressor;
      config.stall_shutdown_seconds = 0;  // no stall timeout either: only the abort can end it
      Runtime rt(config, std::move(comm));
      std::vector<float> g(64 * 8, 1.0f + static_cast<float>(r));
      Status first =
          rt.synchronize(rt.allreduce_async("g", Tensor{g.data(), DType::kFloat32, {64, 8}}, {}));
      EXPECT_TRUE(first.ok()) << "rank " << r << ": " << first.message();
      if (r == victim) arm->store(true);  // after its first op: the others are past it too
      const auto start = std::chrono::steady_clock::now();
      Status s =
          rt.synchronize(rt.allreduce_async("g", Tensor{g.data(), DType::kFloat32, {64, 8}}, {}));
      seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      second[r] = s.ok() ? "ok" : s.message();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(world.aborted());
  EXPECT_THAT(world.abort_reason(), HasSubstr(kInjected));
  EXPECT_THAT(world.abort_reason(), HasSubstr("rank " + std::to_string(victim)));
  for (int r = 0; r < size; ++r) {
    EXPECT_THAT(second[r], HasSubstr(kInjected)) << "rank " << r << " of " << size;
    // Ended by the abort (grace 0.5 s), not by the world's 120 s timeout.
    EXPECT_LT(seconds[r], 60.0) << "rank " << r;
  }
}

TEST(CoordinatorFailure, EndsEveryRankWithTheFailingRanksMessage) {
  expect_failure_ends_every_rank(3, 1, "none");
}

TEST(CoordinatorFailure, RankZeroFailing) {
  expect_failure_ends_every_rank(2, 0, "none");
}

TEST(CoordinatorFailure, DuringACompressedExchange) {
  expect_failure_ends_every_rank(4, 3, "arctopk");
}

}  // namespace
}  // namespace testing
}  // namespace arcreduce
